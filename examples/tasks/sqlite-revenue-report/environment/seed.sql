CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     amount_cents INTEGER NOT NULL, status TEXT NOT NULL);
INSERT INTO customers VALUES (1, 'Ada'), (2, 'Alan'), (3, 'Grace'), (4, 'Edsger'), (5, 'Barbara');
INSERT INTO orders VALUES
  (1, 1, 1000, 'paid'), (2, 1, 225, 'paid'), (3, 1, 9900, 'refunded'),
  (4, 2, 4000, 'paid'), (5, 2, 250, 'paid'),
  (6, 3, 10000, 'paid'), (7, 3, 5000, 'paid'), (8, 3, 700, 'pending'),
  (9, 4, 4250, 'paid'),
  (10, 5, 3000, 'refunded');

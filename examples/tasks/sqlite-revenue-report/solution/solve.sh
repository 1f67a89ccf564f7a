#!/bin/bash
set -e
cd /app
{ echo customer,total
  sqlite3 -separator , shop.db "SELECT c.name, printf('%.2f', SUM(o.amount_cents) / 100.0) AS t
    FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status = 'paid'
    GROUP BY c.id ORDER BY SUM(o.amount_cents) DESC, c.name;"
} > report.csv

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends sqlite3 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN sqlite3 users.db "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL); \
  INSERT INTO users (email) VALUES ('ada@Example.org'), ('alan@bletchley.UK'), ('grace@navy.mil'), \
  ('edsger@example.org'), ('barbara@MIT.edu');"

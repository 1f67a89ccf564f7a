FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends sqlite3 && rm -rf /var/lib/apt/lists/*
ARG DB_NAME=shop.db
ENV SHOP_DB=/app/${DB_NAME}
WORKDIR /app
COPY seed.sql /tmp/
RUN sqlite3 "$SHOP_DB" < /tmp/seed.sql && rm /tmp/seed.sql

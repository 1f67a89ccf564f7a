FROM debian:bookworm-slim
WORKDIR /app
COPY numbers.txt /app/

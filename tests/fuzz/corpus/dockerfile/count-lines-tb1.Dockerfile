FROM debian:bookworm-slim
WORKDIR /app
COPY data.txt /app/

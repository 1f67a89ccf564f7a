FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3-yaml && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY services.yaml .

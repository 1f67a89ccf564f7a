FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY kvserver.py .
COPY --chmod=600 kvdata.json /var/lib/kv/data.json
EXPOSE 9000
CMD ["python3", "/app/kvserver.py"]

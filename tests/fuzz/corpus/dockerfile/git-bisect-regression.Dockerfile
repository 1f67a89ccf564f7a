FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
RUN git config --global user.email dev@example.com && git config --global user.name "Dev" && git config --global init.defaultBranch main
WORKDIR /app
COPY make-history.sh /tmp/make-history.sh
RUN sh /tmp/make-history.sh /app/repo && rm /tmp/make-history.sh

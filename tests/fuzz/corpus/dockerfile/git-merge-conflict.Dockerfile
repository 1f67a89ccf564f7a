FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
RUN git config --global user.email dev@example.com && git config --global user.name "Dev" && git config --global init.defaultBranch main
WORKDIR /app
RUN git init -q repo && cd repo \
 && printf 'name=api\ntimeout=10\nlog=info\n' > settings.conf && git add . && git commit -qm base \
 && git checkout -qb feature \
 && printf 'name=api\ntimeout=45\nlog=info\nretries=5\n' > settings.conf && git commit -qam "feature: slower backend" \
 && git checkout -q main \
 && printf 'name=api\ntimeout=30\nlog=debug\n' > settings.conf && git commit -qam "main: debug logging"

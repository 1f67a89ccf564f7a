FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
RUN git config --global user.email dev@example.com && git config --global user.name "Dev" && git config --global init.defaultBranch main
WORKDIR /app
RUN git init -q repo && cd repo \
 && echo v1 > app.txt && git add app.txt && git commit -qm "initial" \
 && git checkout -qb experiment \
 && echo "launch-code: 7421" > notes.txt && git add notes.txt && git commit -qm "notes for launch" \
 && git checkout -q main && git branch -qD experiment \
 && echo v2 > app.txt && git commit -qam "v2"

FROM debian:bookworm-slim AS builder
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev make && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY rot13.c .
RUN mkdir -p /out && gcc -O2 -o /out/rot13 rot13.c

FROM debian:bookworm-slim
COPY --from=builder /out/rot13 /usr/local/bin/rot13
WORKDIR /app
RUN printf 'Gur fuvc fnvyf ng zvqavtug\n' > message.txt

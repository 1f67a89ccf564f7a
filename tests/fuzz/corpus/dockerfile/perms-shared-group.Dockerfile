FROM debian:bookworm-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN for u in alice bob carol; do useradd -m -s /bin/bash "$u"; done

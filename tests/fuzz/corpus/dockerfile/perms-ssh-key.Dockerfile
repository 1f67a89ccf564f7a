FROM debian:bookworm-slim
RUN useradd -m -s /bin/bash deploy
USER deploy
RUN echo 'export PATH="$HOME/bin:$PATH"' >> /home/deploy/.profile && mkdir /home/deploy/bin
USER root
COPY --chown=root:root --chmod=666 ssh/ /home/deploy/.ssh/
RUN chmod 777 /home/deploy/.ssh

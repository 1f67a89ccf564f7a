FROM debian:bookworm-slim
RUN useradd -m mallory && useradd -m eve && useradd -m trent
RUN mkdir -p /data/reports /data/tmp /data/reports/2024 \
 && echo q1 > /data/reports/q1.txt && chown eve /data/reports/q1.txt \
 && echo drop > /data/tmp/dropper.sh && chown mallory /data/tmp/dropper.sh && chmod 750 /data/tmp/dropper.sh \
 && echo x > /data/reports/2024/summary.txt && chown mallory /data/reports/2024/summary.txt \
 && echo y > /data/reports/2024/budget.txt && chown trent /data/reports/2024/budget.txt \
 && echo z > /data/notes.txt && chown mallory /data/notes.txt

# syntax=docker/dockerfile:1
ARG BASE=debian:bookworm
FROM ${BASE} AS build
ENV A=1 B="two words" \
    C=${A:-x}
RUN <<EOF
echo hi > /x
EOF
COPY --from=build --chmod=0755 <<-END /usr/local/bin/tool
	#!/bin/sh
	echo ${C:+set}
	END
CMD ["sh", "-c", "echo $HOME"]
WORKDIR /app

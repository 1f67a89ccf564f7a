#!/bin/bash
set -e
cd /app/calc
sed -i 's/^OBJS = main.o$/OBJS = main.o geom.o/; s/^LDLIBS =$/LDLIBS = -lm/' Makefile

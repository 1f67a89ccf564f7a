#!/bin/bash
# Terminal-Bench 1.x: the exit status is the verdict.
bash "$TEST_DIR/check.sh"

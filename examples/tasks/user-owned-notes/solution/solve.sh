#!/bin/bash
set -e
mkdir -p ~/notes
echo 'ship it' > ~/notes/todo.txt
chmod 700 ~/notes

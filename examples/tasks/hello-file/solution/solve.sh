#!/bin/bash
echo 'Hello, Flotilla!' > /app/hello.txt

#!/bin/bash
printf 'Hello, terminal!\n' > /app/greeting.txt

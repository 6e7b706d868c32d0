#!/bin/bash
sed -i 's/numbers\[1:\]/numbers/' /app/sumlib.py

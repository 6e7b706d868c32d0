#!/bin/bash
# The tests, offline: pytest comes with the image (terminal-bench's template installs it with uv from the network).
cd /app
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA -p no:cacheprovider

#!/usr/bin/env python3
"""Runs a command under an address-space limit (RLIMIT_AS), as `ulimit -v`
would, and exits with its status.

Usage: with_memory_limit.py MEGABYTES COMMAND...
"""
import os
import resource
import sys

limit = int(sys.argv[1]) * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
os.execvp(sys.argv[2], sys.argv[2:])

#!/usr/bin/env bash
# Debian packages the pipeline and its tests use: chromium (Playwright drives it by path) and
# docker-compose 1.29 (tests/deploy/test_compose.py validates docker-compose.yml with it; no engine needed)
# and jpegtran (libjpeg-turbo-progs: ingestion turns EXIF-rotated JPEGs upright losslessly).
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v jpegtran >/dev/null 2>&1 || need+=(libjpeg-turbo-progs)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-system: missing ${need[*]}; run as root: apt-get update && apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "install-system: installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null

#!/bin/sh
# Make sure a Docker engine runs here, with a real-time budget for the daemons'
# SCHED_FIFO (cgroup v1 gives containers none unless dockerd hands it out).
# Installs docker.io, docker-compose and debootstrap from Debian when missing.
set -eu

missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap"
if [ -n "$missing" ]; then
    echo "installing$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    rt=""
    [ -f /sys/fs/cgroup/cpu/cpu.rt_runtime_us ] && rt="--cpu-rt-runtime=900000"
    echo "starting dockerd $rt"
    nohup dockerd $rt >/var/log/gangsched-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start: see /var/log/gangsched-dockerd.log"; exit 1; }
fi

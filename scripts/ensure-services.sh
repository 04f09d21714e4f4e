#!/usr/bin/env bash
# Starts the local PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) the tests use, if they are down.
# A cluster can report "online" yet not answer (a stopped or wedged postmaster, seen on CI): then it is
# woken, and if that is not enough, stopped by force and started again.
set -u
pg_ready() { pg_isready -q -t 2 -h 127.0.0.1 -p 5432 2>/dev/null; }
pg_wait() { for _ in $(seq 1 "$1"); do pg_ready && return 0; sleep 1; done; return 1; }
pg_cluster() { pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main "$@"; }

if ! pg_ready && command -v pg_ctlcluster >/dev/null 2>&1; then
  pkill -CONT -x postgres 2>/dev/null || true
  pg_cluster start 2>/dev/null || true
  if ! pg_wait 20; then
    echo "PostgreSQL does not answer; restarting the cluster" >&2
    pg_cluster stop --force 2>/dev/null || pkill -9 -x postgres 2>/dev/null || true
    sleep 1
    pg_cluster start || true
    pg_wait 60 || true
  fi
fi
pg_isready -h 127.0.0.1 -p 5432 || {
  echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2
  tail -n 30 /var/log/postgresql/*.log 2>/dev/null >&2
  exit 1
}
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  pkill -CONT -x redis-server 2>/dev/null || true
  sleep 1
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; exit 1; }

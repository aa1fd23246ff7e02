#!/usr/bin/env bash
# `make run`: the emulator, the stack deployed into it, the four functions in one process, a demo pool, and a
# live status. Ctrl-C stops all of it. The stack allows pools in a second emulated account (210987654321), where
# infra/member-account.yaml is deployed for the demo-member pool, whose clusters run there. The functions run built
# optimized, as Lambda runs them (`make run` builds the `tool` profile); APIARY_LOCAL_BIN names another build (the
# docs' and API's tests run the debug one `make test` builds).
set -euo pipefail
cd "$(dirname "$0")/.."
port="${APIARY_EMULATOR_PORT:-5055}"
listen="${APIARY_LISTEN:-127.0.0.1:8080}"
run="${APIARY_RUN_DIR:-.run}"   # the logs, the metrics, the stack's settings and the API's address
rm -f "$run/api.address" "$run/role-calls.jsonl"
mkdir -p "$run"
.venv/bin/python infra/emulator.py --port "$port" --calls "$run/role-calls.jsonl" > "$run/emulator.log" 2>&1 &
emulator=$!
trap 'kill $emulator 2>/dev/null; wait $emulator 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
.venv/bin/python infra/deploy_local.py apiary "$run/stack.env" \
  --admins arn:aws:iam::123456789012:user/admin --max-recheck-seconds 5 --full-sweep-seconds 100 \
  --member-account 210987654321 --member-pools demo-member \
  --metrics "file:$(realpath "$run")/metrics.log" >&2
set -a; source "$run/stack.env"; set +a
echo "logs: $run/apiary.log; metrics (EMF): $run/metrics.log; emulator: $AWS_ENDPOINT_URL" >&2
"${APIARY_LOCAL_BIN:-$CARGO_TARGET_DIR/tool/apiary-local}" --listen "$listen" --address-file "$run/api.address" --sweep-every 10s \
  --fake-clouds --pool demo=infra/demo-pool.json --pool demo-gcp=infra/demo-pool-gcp.json \
  --pool demo-azure=infra/demo-pool-azure.json --pool demo-vsphere=infra/demo-pool-vsphere.json \
  --pool demo-installer=infra/demo-pool-installer.json --pool demo-member=infra/demo-pool-member.json \
  --pool demo-openshift=infra/demo-pool-openshift.json --pool demo-openshift-gcp=infra/demo-pool-openshift-gcp.json \
  --status 2> "$run/apiary.log"

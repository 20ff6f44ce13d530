"""Mixed production traffic: contract analysis, code completion, chat and agent sessions together.

    locust -f locustfiles/mixed.py               # web UI; no --host: built-in emulator (SIMULATED)
    locust -f locustfiles/mixed.py --headless -u 64 -r 4 -t 10m \
        --host http://gpu:8000 --slo slo.yaml

Every traffic model in tokenstorm/workloads/traffic/models/; default weights contract=1, code=3, chat=2, agent=1;
change them with --weights contract=1,code=1,chat=4, $TOKENSTORM_WEIGHTS, a workload file
(--workload-file) or the web UI's class picker (--class-picker). Each workload keeps its own
rows in the stats and its own SLO name. Against a server that does not call tools (vllm serve without
--enable-auto-tool-choice --tool-call-parser NAME) agent sessions are left out, said in one line and in
run.json; asked for by name (--weights agent=N, a workload file, --agent-* options) the run stops instead.
"""

from tokenstorm.workloads.plugin import install, user_classes

install()

# ContractUser, CodeUser, ChatUser — and a user class for any traffic model added to
# tokenstorm/workloads/traffic/models/.
globals().update(user_classes())
__all__ = list(user_classes())

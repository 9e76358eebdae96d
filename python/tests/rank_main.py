"""One training rank, run as its own process with torchrun-style
environment variables by the distributed tests.

argv[1] is a JSON object: remote, local, batch_size, workers (list of
DataLoader worker counts to run, one job each), epochs, job, out, and
optionally resume (a state dict), stop_after (batches, then save the state)
and pause_after (batches, then print PAUSED and wait to be killed).
"""

import json
import os
import sys
import time
import warnings

import helpers  # noqa: F401  (sets sys.path)
import sluice


def main():
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cfg = json.loads(sys.argv[1])
    result = {}
    for w in cfg["workers"]:
        os.environ["SLUICE_JOB"] = "%s-w%d" % (cfg["job"], w)
        ds = sluice.StreamingDataset(
            remote=cfg["remote"],
            local=cfg["local"],
            batch_size=cfg["batch_size"],
            shuffle=cfg.get("shuffle", True),
            timeout=cfg.get("timeout", 30),
        )
        loader = sluice.StreamingDataLoader(ds, batch_size=cfg["batch_size"], num_workers=w,
                                            persistent_workers=bool(cfg.get("persistent")) and w > 0)
        if cfg.get("resume"):
            loader.load_state_dict(cfg["resume"])
        epochs, state = [], None
        for _ in range(cfg.get("epochs", 1)):
            batches = []
            for b in loader:
                batches.append([int(x) for x in b["id"]])
                if cfg.get("pause_after") and len(batches) == cfg["pause_after"]:
                    print("PAUSED", flush=True)
                    time.sleep(3600)
                if cfg.get("stop_after") and len(batches) == cfg["stop_after"]:
                    state = loader.state_dict()
                    break
            epochs.append(batches)
            if state is not None:
                break
        result[str(w)] = {"epochs": epochs, "state": state, "len": len(ds)}
    with open(cfg["out"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(cfg["out"] + ".tmp", cfg["out"])


if __name__ == "__main__":
    main()

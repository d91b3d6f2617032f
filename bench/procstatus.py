"""The process's memory as Linux reports it, for the benchmarks' RSS figures."""


def status_bytes(key):
    """A /proc/self/status field in bytes (VmRSS, VmHWM, ...); 0 if absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0

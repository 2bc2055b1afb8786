import os
import wort

with wort.open("data.pool", kind="woart", size="1G") as db:   # the one writing process
    db[b"alice"] = b'{"age": 42}'
    if os.fork() == 0:                                        # a reading process beside it
        with wort.open("data.pool", read_only=True) as ro:     # writes nothing to the pool
            ok = ro[b"alice"] == b'{"age": 42}'
        os._exit(0 if ok else 1)
    assert os.wait()[1] == 0

import wort

with wort.open("data.pool", kind="woart", size="1G") as db:
    db[b"alice"] = b'{"age": 42}'      # durable when it returns
    assert db[b"alice"] == b'{"age": 42}' and b"alice" in db and len(db) == 1
    for key, value in db.items(start=b"a", end=b"b"):
        print(key, value)
    del db[b"alice"]
    print(wort.kinds(), db.capabilities()["ordered"])

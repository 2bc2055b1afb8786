import wort

with wort.open("data.pool", kind="woart", size="1G") as db:
    with db.batch() as b:              # applied all-or-nothing when the block ends
        b.put(b"alice", b'{"age": 42}')
        b.put(b"bob", b'{"age": 7}')
        b.delete(b"carol")
    assert db[b"bob"] == b'{"age": 7}'

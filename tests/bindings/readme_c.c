#include <stdio.h>
#include <wort.h>

int main(void) {
  wort_config *cfg = wort_config_new();
  wort_db *db = NULL;
  char buf[64];
  size_t len = 0;
  int rc;
  wort_config_put_path(cfg, "data.pool");
  wort_config_put_kind(cfg, "woart");
  rc = wort_open(cfg, &db);
  wort_config_delete(cfg);
  if (rc == WORT_OK) rc = wort_put(db, "alice", 5, "42", 2);
  if (rc == WORT_OK) rc = wort_get_copy(db, "alice", 5, buf, sizeof buf, &len);
  if (rc != WORT_OK) fprintf(stderr, "%s\n", wort_errormsg());
  wort_close(db);
  return rc == WORT_OK && len == 2 ? 0 : 1;
}

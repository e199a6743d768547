/* The harness of the parameter-server tests (ps-harness.c). */
#ifndef KS_PS_HARNESS_H
#define KS_PS_HARNESS_H

#include "testutil.h"
#include "../plugins/ps/wire.h"

#include <gio/gio.h>

/* Set by ps_test_setup_*: the config the program's runs use and the plugins they load. */
extern const char *ps_test_config;
extern const char *const *ps_test_plugins;

/* After g_test_init: a clean environment and the runs' config and plugins, for the
 * transpiler mode (examples/ps-mlp.ini) or the pslib mode (examples/ctr-pslib.ini). */
void ps_test_setup_transpiler (void);
void ps_test_setup_pslib (void);

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

/* Runs ksdist with `head` (NULL-terminated), then the config and --set `sets`. */
int ps_test_run (const char *const *head, const char *const *sets, char **out, char **err);
/* The value after `key` on the first line of `text` that has it (NAN when none). */
double ps_test_value_after (const char *text, const char *key);
/* Every parameter of two exports within `rel` of each other; the largest difference. */
double ps_test_assert_exports_close (const char *a, const char *b, double rel);
int ps_test_free_port (void);

typedef struct {
  char *dir;
  int servers, workers;
  int *ports;
  GSubprocess **proc; /* workers, then servers */
  gboolean no_token;  /* set before the start: the processes have no KS_STORE_TOKEN */
  const char *worker_token; /* set before the start when not NULL: the workers' token */
  int nofile;         /* set before the start when not 0: the servers' RLIMIT_NOFILE */
  gboolean worker_elsewhere; /* set before the start: the workers meet at another store */
} PsTestJob;

/* Starts S servers and W workers of the config with `sets`, meeting at a file store. */
void ps_test_job_start (PsTestJob *j, int servers, int workers, const char *const *sets);
char *ps_test_read_log (PsTestJob *j, int p);
/* Waits until process p's log has `text` (at most `seconds`). */
gboolean ps_test_job_wait_log (PsTestJob *j, int p, const char *text, double seconds);
/* Waits for process p to end; FALSE when it still runs after `seconds`. */
gboolean ps_test_job_wait_one (PsTestJob *j, int p, double seconds);
/* Waits for every process (the test fails past `seconds`); the seconds it took. */
double ps_test_job_wait (PsTestJob *j, double seconds);
int ps_test_job_status (PsTestJob *j, int p);
void ps_test_job_free (PsTestJob *j);
/* Sends `len` bytes on a raw TCP connection to `port` (then silence with `linger`). */
void ps_test_raw_send (int port, const void *data, gsize len, gboolean linger);
/* Makes a ZeroMQ `socket` a CURVE client with the keys of a job whose token is `token`. */
void ps_test_curve (void *socket, const char *token);
/* Gives `socket` (before it connects) a routing id of worker `worker`'s process of a job
 * of ps_test_job_start (its KS_PS_WORKER_SESSION), so that its requests in that worker's
 * name are served as the worker's own (plugins/ps/session.h). */
void ps_test_speak_for (void *socket, guint worker);
/* Sends a header announcing `payload` bytes (with `magic` when not 0), then an empty
 * payload frame. */
void ps_test_send_header (void *socket, PsHeader *h, guint64 payload, guint32 magic);
/* Sends a request of `type` as worker 0 (who said hello) with the job's token, `step` and
 * `payload` to the server on `port`, and waits at most `seconds` for its reply: the
 * reply's type (PS_REPLY_OK or PS_REPLY_ERROR), its text in *text (unless NULL), or -1
 * when none came. */
int ps_test_request (int port, guint type, gint64 step, const void *payload, gsize len,
                     double seconds, char **text);
/* The same as worker `sender` (who must have said hello), with the header's arg and aux. */
int ps_test_request_as (int port, guint sender, guint type, guint32 arg, guint64 aux,
                        gint64 step, const void *payload, gsize len, double seconds,
                        char **text);
/* The same in worker `sender`'s name from a process of another session: a token holder
 * that is not the worker. */
int ps_test_request_stranger (int port, guint sender, guint type, gint64 step,
                              const void *payload, gsize len, double seconds, char **text);
/* A raw TCP connection to `port` on 127.0.0.1 (its descriptor). */
int ps_test_raw_connect (int port);
/* Server s's resident memory (VmRSS) in bytes. */
gsize ps_test_server_rss (PsTestJob *j, int s);
/* The pids of `launcher`'s children (GPid array). */
GArray *ps_test_children_of (GPid launcher);

/* FALSE, with the test marked skipped, when the transpiler (pslib) plugin was not built. */
gboolean ps_test_have_transpiler (void);
gboolean ps_test_have_pslib (void);

/* `ksdist datagen ctr DIR` with `options` (NULL-terminated); the teacher's AUC it prints. */
double ps_test_datagen_ctr (const char *dir, const char *const *options);
/* A small data set of ksdist datagen ctr in DIR/data (a new path), for the runs that check
 * exactness, not accuracy. */
char *ps_test_small_ctr_data (const char *dir);

#endif

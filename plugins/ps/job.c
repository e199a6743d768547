/* A parameter-server job's checkpoints (job.h). */
#include <config.h>
#include "job.h"
#include "wire.h"

#include <json-glib/json-glib.h>
#include <string.h>

/* The newest checkpoint-N under `dir` (a new string), or NULL. */
char *
ps_job_latest (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  gint64 best = -1;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      gint64 step;
      g_autofree char *job = g_build_filename (dir, name, PS_JOB_FILE, NULL);
      if (g_str_has_prefix (name, PS_JOB_PREFIX)
          && g_ascii_string_to_signed (name + strlen (PS_JOB_PREFIX), 10, 0, G_MAXINT64, &step, NULL)
          && step > best && g_file_test (job, G_FILE_TEST_IS_REGULAR))
        best = step;
    }
  return best < 0 ? NULL : g_strdup_printf ("%s/" PS_JOB_PREFIX "%" G_GINT64_FORMAT, dir, best);
}

char *
ps_job_resolve (const char *model_dir, GError **error)
{
  g_autofree char *job = g_build_filename (model_dir, PS_JOB_FILE, NULL);
  char *path;

  if (!g_file_test (model_dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "init_server: the model directory %s does not exist", model_dir);
      return NULL;
    }
  path = g_file_test (job, G_FILE_TEST_IS_REGULAR) ? g_strdup (model_dir) : ps_job_latest (model_dir);
  if (path == NULL)
    g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                 "init_server: %s holds no parameter-server checkpoint (" PS_JOB_PREFIX "N/"
                 PS_JOB_FILE " with the servers' files)", model_dir);
  return path;
}

static gboolean
write_job_file (const char *dir, const KsTrainStatus *status, GHashTable *metadata,
                int servers, const char *save_id, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autofree char *path = g_build_filename (dir, PS_JOB_FILE, NULL);
  GHashTableIter it;
  gpointer k, v;

  json_builder_begin_object (b);
  if (metadata != NULL)
    for (g_hash_table_iter_init (&it, metadata); g_hash_table_iter_next (&it, &k, &v);)
      {
        json_builder_set_member_name (b, k);
        json_builder_add_string_value (b, v);
      }
#define FIELD(key, ...)                                                           \
  G_STMT_START {                                                                  \
    g_autofree char *v_ = g_strdup_printf (__VA_ARGS__);                          \
    json_builder_set_member_name (b, key);                                        \
    json_builder_add_string_value (b, v_);                                        \
  } G_STMT_END
  FIELD ("format", "ksdist-ps-job");
  FIELD ("step", "%" G_GINT64_FORMAT, status->step);
  FIELD ("epoch", "%" G_GINT64_FORMAT, status->epoch);
  FIELD ("servers", "%d", servers);
  FIELD (PS_JOB_SAVE_KEY, "%s", save_id);
#undef FIELD
  json_builder_end_object (b);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  gsize len;
  g_autofree char *text = json_generator_to_data (gen, &len);
  return g_file_set_contents_full (path, text, (gssize) len,
                                   G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                   0644, error);
}

/* Worker 0: the servers' shards and the job file into a temporary directory, committed
 * as every checkpoint is (ks_checkpoint_commit). */
gboolean
ps_job_save (const char *dir, const KsTrainStatus *status, GHashTable *metadata, int servers,
             guint keep, PsSaveServers save_servers, void *data, GError **error)
{
  g_autofree char *final = g_strdup_printf ("%s/" PS_JOB_PREFIX "%" G_GINT64_FORMAT, dir, status->step);
  g_autofree char *tmp = ks_checkpoint_begin (final, error);

  if (tmp == NULL)
    return FALSE;
  g_autofree char *save_id = ks_checkpoint_save_id (tmp);
  /* the servers compute the same save id from the directory they are told */
  if (!save_servers (data, tmp, status->step, error)
      || !write_job_file (tmp, status, metadata, servers, save_id, error))
    {
      ks_checkpoint_abort (tmp);
      return FALSE;
    }
  return ks_checkpoint_commit (tmp, final, keep, error);
}

gboolean
ps_job_read (const char *path, KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  g_autofree char *file = g_build_filename (path, PS_JOB_FILE, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  JsonObject *o;
  const char *step, *epoch;

  if (!json_parser_load_from_mapped_file (parser, file, error))
    return FALSE;
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return ps_failed (error, "%s: not a JSON object", file);
  o = json_node_get_object (json_parser_get_root (parser));
  g_autoptr (GList) members = json_object_get_members (o);
  for (GList *l = members; l != NULL; l = l->next)
    {
      JsonNode *n = json_object_get_member (o, l->data);
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
        return ps_failed (error, "%s: '%s' is not a string", file, (char *) l->data);
      g_hash_table_insert (meta, g_strdup (l->data), g_strdup (json_node_get_string (n)));
    }
  step = g_hash_table_lookup (meta, "step");
  epoch = g_hash_table_lookup (meta, "epoch");
  if (g_strcmp0 (g_hash_table_lookup (meta, "format"), "ksdist-ps-job") != 0 || step == NULL
      || epoch == NULL
      || !g_ascii_string_to_signed (step, 10, 0, G_MAXINT64 / 2, &status->step, NULL)
      || !g_ascii_string_to_signed (epoch, 10, -1, G_MAXINT64 / 2, &status->epoch, NULL))
    return ps_failed (error, "%s: not a ksdist parameter-server job file (format, step and epoch "
                   "as decimal strings)", file);
  if (metadata != NULL)
    *metadata = g_steal_pointer (&meta);
  return TRUE;
}

gboolean
ps_job_identity_read (const char *path, PsJobIdentity *id, GError **error)
{
  g_autoptr (GHashTable) meta = NULL;
  KsTrainStatus status;
  const char *servers, *save;
  gint64 n;

  memset (id, 0, sizeof *id);
  id->file = g_build_filename (path, PS_JOB_FILE, NULL);
  if (!ps_job_read (path, &status, &meta, error))
    return FALSE;
  id->step = status.step;
  servers = g_hash_table_lookup (meta, "servers");
  if (servers == NULL || !g_ascii_string_to_signed (servers, 10, 1, 1 << 20, &n, NULL))
    return ps_failed (error, "%s: no valid 'servers' entry (a count from 1 to %d): restore "
                      "the checkpoint directory whole from the run that saved it", id->file,
                      1 << 20);
  id->servers = (int) n;
  save = g_hash_table_lookup (meta, PS_JOB_SAVE_KEY);
  if (save != NULL
      && (strlen (save) != 64 || strspn (save, "0123456789abcdef") != 64))
    return ps_failed (error, "%s: '" PS_JOB_SAVE_KEY "' is not 64 hexadecimal digits: restore "
                      "the checkpoint directory whole from the run that saved it", id->file);
  if (save == NULL)
    g_warning ("%s: written by an older ksdist, whose checkpoint files name no save: a file "
               "of another save or step beside them would not be noticed; the next save "
               "names it", id->file);
  id->save_id = g_strdup (save);
  return TRUE;
}

void
ps_job_identity_clear (PsJobIdentity *id)
{
  g_clear_pointer (&id->file, g_free);
  g_clear_pointer (&id->save_id, g_free);
}

/* Every worker's flag, and together: TRUE when all are set. */
static gboolean
all_ok (KsRoleMaker *role, gboolean mine, GError **error)
{
  double in = mine, out = 0;
  return ks_role_maker_all_reduce_worker (role, &in, &out, 1, KS_REDUCE_MIN, error) && out > 0;
}

gboolean
ps_job_save_check_point (KsRoleMaker *role, const char *dir, const KsTrainStatus *status,
                         GHashTable *metadata, guint keep, PsSaveServers save_servers,
                         void *data, GError **error)
{
  g_autoptr (GError) mine = NULL;
  gboolean saved = TRUE;

  /* every worker's pushes of this step are on the servers (the caller flushed) */
  if (!ks_role_maker_barrier_worker (role, error))
    return FALSE;
  if (ks_role_maker_is_first_worker (role))
    saved = ps_job_save (dir, status, metadata, ks_role_maker_server_num (role), keep,
                         save_servers, data, &mine);
  if (!all_ok (role, saved, error))
    {
      if (error != NULL && *error == NULL)
        g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                     "the checkpoint of step %" G_GINT64_FORMAT " was not written%s%s",
                     status->step, mine != NULL ? ": " : " (see worker 0's log)",
                     mine != NULL ? mine->message : "");
      return FALSE;
    }
  return TRUE;
}

gboolean
ps_job_load_check_point (KsRoleMaker *role, const char *dir, KsTrainStatus *status,
                         GHashTable **metadata, gint64 *found, GError **error)
{
  g_autofree char *latest = ps_job_latest (dir);
  double in, out;

  *found = -1;
  /* the one worker 0 finds, so all resume from the same */
  if (latest != NULL && !ps_job_read (latest, status, metadata, error))
    return FALSE;
  if (latest != NULL)
    *found = status->step;
  in = ks_role_maker_is_first_worker (role) ? (double) *found : -1;
  if (!ks_role_maker_all_reduce_worker (role, &in, &out, 1, KS_REDUCE_MAX, error))
    return FALSE;
  if ((gint64) out != *found)
    return ps_failed (error, "worker 0 resumes from step %.0f of %s but this worker found step %"
                   G_GINT64_FORMAT ": give every worker the same [train] checkpoint_dir", out,
                   dir, *found);
  if (*found < 0)
    {
      status->epoch = -1;
      status->step = 0;
    }
  return TRUE;
}

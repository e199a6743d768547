/* A run's observers (KsTrainObserver): the default one prints the run's lines on stdout,
 * [log] metrics writes JSONL, a program may add its own. The loop only notifies them. */
#include "trainer-private.h"

#include <errno.h>
#include <math.h>

typedef struct {
  guint id;
  const KsTrainObserver *o;
  gpointer data;
} Entry;

/* A slot of a table that may be older (smaller) than this header's. */
#define SLOT(o, f) \
  ((o)->size >= G_STRUCT_OFFSET (KsTrainObserver, f) + sizeof (o)->f ? (o)->f : NULL)

/* "101 held-out samples", or with [train] eval_rows below the held-out set's size
 * "64 of 101 held-out samples: [train] eval_rows = 64". */
static char *
eval_count (KsTrainer *t, gsize samples, gsize total)
{
  if (total <= samples)
    return g_strdup_printf ("%" G_GSIZE_FORMAT " held-out %s", samples, t->task->unit);
  return g_strdup_printf ("%" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " held-out %s: [train] "
                          "eval_rows = %" G_GSIZE_FORMAT, samples, total, t->task->unit,
                          ks_trainer_eval_cap (t));
}

/* The default observer: a line rewritten in place on a terminal, plain lines otherwise. */
static void
print_step (KsTrainer *t, const KsTrainStep *s, gpointer data)
{
  const char *per_s = s->task_steps ? "steps" : "samples";
  g_autofree char *rate_text = g_strdup_printf (s->task_steps ? "%.2f" : "%.0f", s->rate);
  g_autofree char *lr_text = isnan (s->lr) ? g_strdup ("") : g_strdup_printf ("lr %.3g ", s->lr);
  if (t->tty)
    {
      printf ("\rstep %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  loss %.4f  %s %s %s/s  "
              "ETA %.0fs   ",
              s->step, s->steps, s->loss, lr_text, rate_text, per_s, s->eta_s);
      if (s->step == s->steps)
        putchar ('\n');
    }
  else
    printf ("step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " loss %.4f %s%s/s %s eta_s %.0f\n",
            s->step, s->steps, s->loss, lr_text, per_s, rate_text, s->eta_s);
  fflush (stdout);
}

static void
print_eval (KsTrainer *t, const KsTrainEval *e, gpointer data)
{
  g_autofree char *count = eval_count (t, e->samples, e->total);
  printf ("%seval %s %.4f at step %" G_GINT64_FORMAT " (%s)\n", t->tty ? "\n" : "",
          t->task->metric, e->value, e->step, count);
}

static void
print_end (KsTrainer *t, const KsTrainEnd *e, gpointer data)
{
  g_autofree char *count = eval_count (t, e->samples, e->total);
  printf ("eval %s %.4f (%s)\n", t->task->metric, e->eval, count);
}

/* on a terminal only: a line rewritten in place, ended with the phase */
static void
print_progress (KsTrainer *t, const KsTrainProgress *p, gpointer data)
{
  if (!t->tty)
    return;
  printf ("\r%s: %" G_GSIZE_FORMAT "/%" G_GSIZE_FORMAT "  %.0fs, ETA %.0fs   %s", p->what,
          p->done, p->total, p->elapsed_s, p->eta_s, p->done == p->total ? "\n" : "");
  fflush (stdout);
}

static const KsTrainObserver printer = {
  .size = sizeof printer, .on_step = print_step, .on_eval = print_eval, .on_end = print_end,
  .on_progress = print_progress,
};

/* [log] metrics: a line per report, the step, the wall time since the run began, then
 * `fields` ("\"loss\": 0.5, ..."), the held-out metric when evaluated. */
static void
metrics_line (KsTrainer *t, gint64 step, double wall_s, const char *fields, const double *eval)
{
  fprintf (t->metrics, "{\"step\": %" G_GINT64_FORMAT ", \"wall_s\": %.3f%s%s", step, wall_s,
           *fields ? ", " : "", fields);
  if (eval != NULL)
    fprintf (t->metrics, ", \"eval_%s\": %.6g", t->task->metric, *eval);
  fputs ("}\n", t->metrics);
  fflush (t->metrics);
}

static void
metrics_step (KsTrainer *t, const KsTrainStep *s, gpointer data)
{
  const char *per_s = s->task_steps ? "steps" : "samples";
  g_autoptr (GString) fields = g_string_new (NULL);
  g_string_append_printf (fields, "\"loss\": %.6g", s->loss);
  if (!isnan (s->lr))
    g_string_append_printf (fields, ", \"lr\": %.6g", s->lr);
  g_string_append_printf (fields, ", \"%s_per_s\": %.1f", per_s, s->rate);
  if (t->tokens_per_row > 0)
    g_string_append_printf (fields, ", \"tokens_per_s\": %.1f", s->rate * t->tokens_per_row);
  g_autofree char *amp = ks_trainer_amp_fields (t);
  g_string_append (fields, amp);
  metrics_line (t, s->step, s->wall_s, fields->str, s->eval);
}

/* an evaluation between reports has a line of its own */
static void
metrics_eval (KsTrainer *t, const KsTrainEval *e, gpointer data)
{
  if (!e->reported)
    metrics_line (t, e->step, e->wall_s, "", &e->value);
}

static const KsTrainObserver metrics = {
  .size = sizeof metrics, .on_step = metrics_step, .on_eval = metrics_eval,
};

static guint
add (KsTrainer *t, const KsTrainObserver *o, gpointer data)
{
  Entry e = { ++t->observer_ids, o, data };
  if (t->observers == NULL)
    t->observers = g_array_new (FALSE, FALSE, sizeof (Entry));
  g_array_append_val (t->observers, e);
  return e.id;
}

void
ks_trainer_observe_init (KsTrainer *t)
{
  guint id = add (t, &printer, NULL);
  g_assert (id == KS_TRAINER_OBSERVER_PRINT);
}

gboolean
ks_trainer_metrics_open (KsTrainer *t, const char *path, gboolean append, GError **error)
{
  if ((t->metrics = fopen (path, append ? "a" : "w")) == NULL)
    return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "[log] metrics = %s: %s", path, g_strerror (errno)), FALSE;
  add (t, &metrics, NULL);
  return TRUE;
}

/* The smallest table there ever was: the first four slots. A smaller `size` is a table
 * whose size was not set, whose slots would never be called. */
#define FIRST_SIZE (G_STRUCT_OFFSET (KsTrainObserver, on_end) + sizeof (gpointer))

guint
ks_trainer_add_observer (KsTrainer *t, const KsTrainObserver *observer, gpointer data)
{
  g_return_val_if_fail (t != NULL && observer != NULL, 0);
  if (observer->size < FIRST_SIZE)
    {
      g_critical ("ks_trainer_add_observer: the observer's size is %" G_GSIZE_FORMAT
                  ", less than any KsTrainObserver's: set .size = sizeof (KsTrainObserver)",
                  observer->size);
      return 0;
    }
  return add (t, observer, data);
}

void
ks_trainer_remove_observer (KsTrainer *t, guint id)
{
  g_return_if_fail (t != NULL);
  for (guint i = 0; t->observers != NULL && i < t->observers->len; i++)
    if (g_array_index (t->observers, Entry, i).id == id)
      {
        g_array_remove_index (t->observers, i);
        return;
      }
  g_critical ("ks_trainer_remove_observer: no observer %u on this trainer: an id "
              "ks_trainer_add_observer returned, or KS_TRAINER_OBSERVER_PRINT, once", id);
}

#define NOTIFY(t, f, ...)                                                \
  for (guint i = 0; (t)->observers != NULL && i < (t)->observers->len; i++) \
    {                                                                    \
      const Entry *e_ = &g_array_index ((t)->observers, Entry, i);       \
      if (SLOT (e_->o, f) != NULL)                                       \
        e_->o->f ((t), __VA_ARGS__, e_->data);                           \
    }

void
ks_trainer_notify_step (KsTrainer *t, const KsTrainStep *s)
{
  NOTIFY (t, on_step, s);
}

void
ks_trainer_notify_eval (KsTrainer *t, const KsTrainEval *e)
{
  NOTIFY (t, on_eval, e);
}

void
ks_trainer_notify_save (KsTrainer *t, gint64 step, const char *dir)
{
  NOTIFY (t, on_save, step, dir);
}

void
ks_trainer_notify_end (KsTrainer *t, const KsTrainEnd *e)
{
  NOTIFY (t, on_end, e);
}

void
ks_trainer_notify_progress (KsTrainer *t, const KsTrainProgress *p)
{
  NOTIFY (t, on_progress, p);
}

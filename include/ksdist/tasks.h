/* ksdist tasks — the models, data readers and Reptile that `ksdist train` knows by name,
 * outside the core: libksdist-tasks (pkg-config ksdist-tasks), which a C program may
 * link beside libksdist to run or reuse them. Only this library needs gdk-pixbuf.
 *
 * For programs that train ksdist's named tasks (gpt, mlp, layers, ctr, Reptile) or reuse
 * their parts, and ksdist's own tools. */
#ifndef KSDIST_TASKS_H
#define KSDIST_TASKS_H

#include <ksdist/ksdist.h>
#include <ksdist/ctr.h>
#include <ksdist/data.h>
#include <ksdist/gpt.h>
#include <ksdist/images.h>
#include <ksdist/meta.h>
#include <ksdist/table.h>

G_BEGIN_DECLS

/* Adds the keys this library reads ([model] but init_from, which is the trainer's;
 * [data], [meta] and [layer.NAME]) to `config`, before ks_config_validate and
 * ks_builtin_task: ksdist's commands do it where they load a configuration, as a program
 * that runs the built-in tasks must. A key already there is kept (a second call adds
 * nothing). */
void ks_tasks_add_schema (KsConfig *config);

/* The built-in task of the configuration's [model] type, [data] task and [meta]
 * algorithm (mlp, gpt, addition, ctr, Reptile); an error when they do not go together. */
const KsTrainTask *ks_builtin_task (const KsConfig *config, GError **error);

/* The click-through-rate task (pslib's sparse tables) and Reptile, also found by
 * ks_builtin_task. */
extern const KsTrainTask ks_ctr_task;
extern const KsTrainTask ks_meta_task;

G_END_DECLS

#endif

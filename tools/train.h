/* ksdist train, config, segment and launch: the built-in tasks the trainer (trainer.h)
 * runs, chosen by [model] type, [data] task and [meta] algorithm. */
#ifndef KS_TRAIN_H
#define KS_TRAIN_H

#include "cli.h"

#include <ksdist/tasks.h>

/* The plan's check (ks_trainer_check) of the configuration's task for `world` (NULL:
 * the world is not known yet), printing what it refuses. Returns the exit status: 0, 2
 * for a configuration error, 1 otherwise. */
int ks_train_check (KsRegistry *registry, KsConfig *config, const KsTrainWorld *world,
                    gboolean build);
/* A command that runs `body` on a trainer of the [CONFIG] and --set lines of its
 * command line, after the plan's check (train, segment); the exit status. */
int ks_train_command (const KsCommand *command, int argc, char **argv,
                      int (*body) (KsTrainer *t));

#endif

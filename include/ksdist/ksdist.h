/* ksdist — distributed neural-network training: the core's whole public API (the
 * tasks library's, libksdist-tasks, is ksdist/tasks.h).
 *
 * For program authors who want the core in one include; a plugin author may include only
 * the headers of its kind. */
#ifndef KSDIST_H
#define KSDIST_H

#include <ksdist/version.h>
#include <ksdist/types.h>
#include <ksdist/config.h>
#include <ksdist/plugin.h>
#include <ksdist/registry.h>
#include <ksdist/compute.h>
#include <ksdist/tensor.h>
#include <ksdist/model.h>
#include <ksdist/checkpoint.h>
#include <ksdist/comm.h>
#include <ksdist/away.h>
#include <ksdist/average.h>
#include <ksdist/rolemaker.h>
#include <ksdist/segmenter.h>
#include <ksdist/pipeline.h>
#include <ksdist/optimizer.h>
#include <ksdist/dist-optimizer.h>
#include <ksdist/algorithm.h>
#include <ksdist/factory.h>
#include <ksdist/sparse.h>
#include <ksdist/trainer.h>

#endif

/* [model] init_from: a fresh run starts from weights trained elsewhere (a safetensors
 * file in ksdist's layout or PyTorch's, as `ksdist export --torch` writes it) instead of
 * its initialisers. Every parameter must be there with its shape, and every tensor of the
 * file must belong to the model (on a pipeline, to some stage's part of it), so a file of
 * another model is refused rather than half used. A resumed run's checkpoint replaces
 * these weights afterwards. */
#include "trainer-private.h"

#include <string.h>

/* The whole model's graph: the layer list built on a model of no device (a pipeline
 * stage holds only its part), else NULL for the trainer's own model. */
static gboolean
whole_model (KsTrainer *t, KsModel **whole, GError **error)
{
  KsExpr *logits;
  *whole = NULL;
  if (t->layers == NULL)
    return TRUE;
  *whole = ks_model_new (NULL);
  return ks_layers_build (*whole, t->layers, t->n_layers, &logits, error)
         && t->loss_layer->build (*whole, logits, t->loss_layer->args, error) != NULL;
}

/* The names of every parameter of the whole model. */
static char **
whole_model_names (KsTrainer *t, GError **error)
{
  g_autoptr (KsModel) whole = NULL;
  if (!whole_model (t, &whole, error))
    return NULL;
  return ks_model_parameter_names (whole != NULL ? whole : t->model);
}

char *
ks_trainer_torch_layouts (KsTrainer *t)
{
  g_autoptr (KsModel) whole = NULL;
  if (!whole_model (t, &whole, NULL))
    return g_strdup ("");
  return ks_model_torch_layouts (whole != NULL ? whole : t->model);
}

/* Whether the file's tensor `name` is one of `names` under its own or PyTorch's name. */
static gboolean
belongs (const char *name, char **names, KsTorchNameFunc rename)
{
  for (int i = 0; names[i] != NULL; i++)
    {
      gboolean transpose;
      g_autofree char *torch = ks_torch_name (names[i], rename, &transpose);
      if (strcmp (names[i], name) == 0 || strcmp (torch, name) == 0)
        return TRUE;
    }
  return FALSE;
}

gboolean
ks_trainer_init_from (KsTrainer *t, GError **error)
{
  const char *file = ks_config_get_string (t->config, "model", "init_from");
  KsTorchNameFunc rename = t->task->torch_name;
  g_autoptr (GHashTable) used = g_hash_table_new (g_str_hash, g_str_equal);

  if (*file == '\0')
    return TRUE;
  g_autoptr (GPtrArray) tensors = ks_safetensors_read (file, error);
  g_auto (GStrv) names = tensors != NULL ? whole_model_names (t, error) : NULL;
  if (names == NULL)
    return g_prefix_error (error, "[model] init_from: "), FALSE;
  for (guint i = 0; i < tensors->len; i++)
    {
      const char *name = ((const KsSavedTensor *) g_ptr_array_index (tensors, i))->name;
      if (!belongs (name, names, rename))
        return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                            "[model] init_from = %s: its tensor '%s' is no parameter of this "
                            "model (%s): is it the weights of another model?", file, name,
                            ks_trainer_task_describe (t)), FALSE;
    }
  if (!ks_model_load_weights (t->model, tensors, file, rename, used, error))
    return g_prefix_error (error, "[model] init_from: "), FALSE;
  g_message ("started from the %u weights of %s", g_hash_table_size (used), file);
  return TRUE;
}

/* Writing a plot: the SVG as it is to FILE.svg, or rendered by librsvg on cairo to
 * FILE.png; either into a temporary file renamed over FILE, so a failure leaves no
 * half-written plot. */
#include <config.h>

#include "cli.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_RSVG
#include <cairo.h>
#include <librsvg/rsvg.h>

static gboolean
write_png (const char *output, const char *svg, GError **error)
{
  g_autoptr (GObject) object = NULL;
  RsvgHandle *handle = rsvg_handle_new_from_data ((const guint8 *) svg, strlen (svg), error);
  g_autofree char *tmp = g_strdup_printf ("%s.tmp-%d", output, (int) getpid ());
  double width, height;
  gboolean ok = FALSE;

  if (handle == NULL)
    return FALSE;
  object = G_OBJECT (handle);
  if (!rsvg_handle_get_intrinsic_size_in_pixels (handle, &width, &height) || width < 1
      || height < 1)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "the plot has no size in pixels");
      return FALSE;
    }
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int) width,
                                                         (int) height);
  cairo_t *cr = cairo_create (surface);
  RsvgRectangle viewport = { 0, 0, width, height };
  cairo_set_source_rgb (cr, 1, 1, 1); /* opaque white, as the SVG looks in a browser */
  cairo_paint (cr);
  if (rsvg_handle_render_document (handle, cr, &viewport, error))
    {
      cairo_status_t status = cairo_surface_write_to_png (surface, tmp);
      if (status != CAIRO_STATUS_SUCCESS)
        g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot write %s: %s", tmp,
                     cairo_status_to_string (status));
      else if (g_rename (tmp, output) != 0)
        g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                     "cannot rename %s to %s: %s", tmp, output, g_strerror (errno));
      else
        ok = TRUE;
    }
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  if (!ok)
    g_unlink (tmp);
  return ok;
}
#endif

gboolean
ks_plot_check_output (const char *output, GError **error)
{
#ifdef HAVE_RSVG
  if (g_str_has_suffix (output, ".svg") || g_str_has_suffix (output, ".png"))
    return TRUE;
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
               "-o %s: the file's name says the format: *.svg or *.png", output);
#else
  if (g_str_has_suffix (output, ".svg"))
    return TRUE;
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
               "-o %s: this ksdist was built without librsvg, so it writes SVG only; name the "
               "file *.svg (or apt-get install librsvg2-dev and build again)", output);
#endif
  return FALSE;
}

gboolean
ks_plot_write (const char *output, const char *svg, GError **error)
{
  if (!ks_plot_check_output (output, error))
    return FALSE;
  if (g_str_has_suffix (output, ".svg"))
    return g_file_set_contents (output, svg, -1, error); /* a temporary file, then rename */
#ifdef HAVE_RSVG
  return write_png (output, svg, error);
#else
  g_return_val_if_reached (FALSE);
#endif
}

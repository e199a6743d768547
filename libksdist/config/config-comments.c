/* Comments after a value: `path = digits   # a folder` means digits. GKeyFile keeps
 * everything after the '=' in the value, so a comment written after a value (as the
 * README's examples and `ksdist config`'s own output do) would silently become part of
 * it; it is cut here, before GKeyFile reads the text. */
#include "ks-private.h"

#include <string.h>

/* Whether p begins a comment: a '#' or ';' that starts the value or follows a blank. */
static gboolean
starts_comment (const char *p, const char *value)
{
  return (*p == '#' || *p == ';') && (p == value || p[-1] == ' ' || p[-1] == '\t');
}

char *
ks_config_strip_comments (const char *text)
{
  GString *out = g_string_sized_new (strlen (text));

  for (const char *line = text; *line != '\0';)
    {
      const char *end = strchr (line, '\n');
      const char *stop = end != NULL ? end : line + strlen (line);
      const char *p = line;

      while (p < stop && (*p == ' ' || *p == '\t'))
        p++;
      if (p < stop && *p == '#')
        {
          /* a whole-line comment, kept for GKeyFile */
          g_string_append_len (out, line, stop - line);
        }
      else
        {
          const char *eq = memchr (line, '=', stop - line);
          const char *value = eq != NULL ? eq + 1 : line;
          if (eq != NULL)
            g_string_append_len (out, line, value - line);
          for (p = value; p < stop; p++)
            {
              /* \# and \; are a literal # and ; in a value */
              if (eq != NULL && *p == '\\' && p + 1 < stop && (p[1] == '#' || p[1] == ';'))
                {
                  g_string_append_c (out, *++p);
                  continue;
                }
              if (eq != NULL && *p == '\\' && p + 1 < stop)
                {
                  g_string_append_len (out, p, 2); /* GKeyFile's own escapes, \\ included */
                  p++;
                  continue;
                }
              if (starts_comment (p, value))
                break;
              g_string_append_c (out, *p);
            }
        }
      if (end == NULL)
        break;
      g_string_append_c (out, '\n');
      line = end + 1;
    }
  return g_string_free (out, FALSE);
}

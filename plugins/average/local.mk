# Gradient averaging in buckets while backward goes on (buckets.h): not a plugin, a
# convenience library that the collective and pslib plugins link, so both average
# gradients the same way. Plugins include it as "average/buckets.h".
noinst_LTLIBRARIES += plugins/average/libaverage.la
plugins_average_libaverage_la_SOURCES = plugins/average/buckets.c plugins/average/buckets.h

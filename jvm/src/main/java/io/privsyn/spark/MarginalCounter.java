package io.privsyn.spark;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Collections;
import java.util.Iterator;
import java.util.Properties;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The marginal engine's JVM backend: exact count tables over bit-packed code columns.
 *
 * <p>Each Spark partition reads its rows as Spark's internal rows (no hand-off to Python), unpacks
 * every attribute's code from the bigint words, recodes it through a lookup table, and adds one to
 * each requested table's cell; the partition's count array is then summed with a tree reduction.
 * Only count arrays reach the driver. The layout of the returned array (tables, row count, then
 * out-of-domain and null-failure tallies per column) and of the plan is written by
 * {@code privsyn_spark/measure/jvm_counter.py}, which is the only caller.
 *
 * <p>The plan starts with a header (magic, plan version, the driver's Spark version); the driver
 * and every executor check it against this jar's plan version and the Spark it was built for, so a
 * different jar or Spark on the executors fails the job with a message saying so.
 */
public final class MarginalCounter {
  /** "PSYC": the first int of every plan. */
  public static final int MAGIC = 0x50535943;
  /** Version of the plan layout; {@code jvm_counter.PLAN_VERSION} in Python must be the same. */
  public static final int PLAN_VERSION = 3;
  /** Prefix of every error message of the counter (the Python side looks for it). */
  public static final String ERROR = "privsyn-spark counter: ";
  /** The Spark version this jar was compiled against (Maven writes it into counter.properties). */
  public static final String BUILT_FOR = builtFor();

  private MarginalCounter() {}

  /**
   * Counts over {@code packed} (bigint columns only) following {@code plan} (little-endian int32s).
   * Returns the summed count array as little-endian int64 bytes.
   */
  public static byte[] count(Dataset<Row> packed, byte[] plan, int depth) {
    Layout layout = new Layout(plan);
    checkVersions(BUILT_FOR, runningSpark(), runningSpark(), "driver");
    JavaRDD<InternalRow> rows =
        ((org.apache.spark.sql.classic.Dataset<Row>) packed).queryExecution().toRdd().toJavaRDD();
    long[] total;
    if (rows.getNumPartitions() == 0) {
      total = new long[layout.length()];
    } else {
      total = rows.mapPartitions(new CountPartition(layout)).treeReduce(new AddCounts(), depth);
    }
    ByteBuffer out = ByteBuffer.allocate(8 * total.length).order(ByteOrder.LITTLE_ENDIAN);
    out.asLongBuffer().put(total);
    return out.array();
  }

  /** Spark's version in this JVM. */
  static String runningSpark() {
    return org.apache.spark.package$.MODULE$.SPARK_VERSION();
  }

  /**
   * Fails unless this JVM's Spark ({@code running}, on the driver or an executor) and the driver's
   * (carried by the plan) have the major.minor version the jar was built for.
   */
  static void checkVersions(String builtFor, String driverSpark, String running, String where) {
    String built = minor(builtFor);
    if (!built.equals(minor(running)) || !built.equals(minor(driverSpark))) {
      throw new IllegalStateException(ERROR + "this jar was built for Spark " + builtFor + "; the driver "
          + "runs Spark " + driverSpark + ", this " + where + " runs Spark " + running + ": give every node "
          + "the Spark the jar was built for, or rebuild it (scripts/setup.sh, or mvn -f jvm/pom.xml "
          + "-Dspark.version=<version> package)");
    }
  }

  static String minor(String version) {
    String[] parts = version.split("\\.");
    return parts.length < 2 ? version : parts[0] + "." + parts[1];
  }

  private static String builtFor() {
    Properties props = new Properties();
    try (InputStream in = MarginalCounter.class.getResourceAsStream("counter.properties")) {
      if (in != null) {
        props.load(in);
      }
    } catch (IOException e) {
      throw new IllegalStateException(ERROR + "cannot read counter.properties", e);
    }
    return props.getProperty("spark.version", "unknown");
  }

  /**
   * One partition's counts, after checking this executor's Spark. Named classes, not lambdas: an
   * executor without the jar then fails with a ClassNotFoundException naming this class.
   */
  static final class CountPartition implements FlatMapFunction<Iterator<InternalRow>, long[]> {
    private static final long serialVersionUID = 1L;
    private final Layout layout;

    CountPartition(Layout layout) {
      this.layout = layout;
    }

    @Override
    public Iterator<long[]> call(Iterator<InternalRow> rows) {
      checkVersions(BUILT_FOR, layout.driverSpark, runningSpark(), "executor");
      return Collections.singletonList(layout.count(rows)).iterator();
    }
  }

  /** Sums two partial count arrays (into the left one). */
  static final class AddCounts implements Function2<long[], long[], long[]> {
    private static final long serialVersionUID = 1L;

    @Override
    public long[] call(long[] left, long[] right) {
      for (int i = 0; i < left.length; i++) {
        left[i] += right[i];
      }
      return left;
    }
  }

  /** The decoded plan: where each attribute's code sits, the tables, the status fields, the lookups. */
  static final class Layout implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private static final int BLOCK = 4096;
    private static final int TALLIES = 3;
    final String driverSpark;
    final int words;
    final int statusBits;
    final int statusOutside;
    final int statusNull;
    final int statusNotANumber;
    final int cells;
    final int[] attrWord;
    final int[] attrShift;
    final long[] attrMask;
    final int[] attrLut;
    final int[][] tableAttrs;
    final int[][] tableSizes;
    final int[] tableOffset;
    final int[] statusWord;
    final int[] statusShift;
    final long[] statusMask;
    final int[] luts;

    Layout(byte[] bytes) {
      ByteBuffer raw = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
      int[] p = new int[bytes.length / 4];
      raw.asIntBuffer().get(p);
      if (p.length < 4 || p[0] != MAGIC) {
        throw new IllegalArgumentException(ERROR + "not a counter plan (no header)");
      }
      if (p[1] != PLAN_VERSION) {
        throw new IllegalStateException(ERROR + "the plan has version " + p[1] + ", this jar reads "
            + "version " + PLAN_VERSION + ": the jar on this node is not the one privsyn-spark ships");
      }
      driverSpark = p[2] + "." + p[3];
      int i = 4;
      words = p[i++];
      int attrs = p[i++];
      int tables = p[i++];
      int columns = p[i++];
      cells = p[i++];
      statusBits = p[i++];
      statusOutside = p[i++];
      statusNull = p[i++];
      statusNotANumber = p[i++];
      attrWord = new int[attrs];
      attrShift = new int[attrs];
      attrMask = new long[attrs];
      attrLut = new int[attrs];
      for (int a = 0; a < attrs; a++) {
        attrWord[a] = p[i++];
        attrShift[a] = p[i++];
        attrMask[a] = (1L << p[i++]) - 1;
        attrLut[a] = p[i++];
      }
      tableAttrs = new int[tables][];
      tableSizes = new int[tables][];
      tableOffset = new int[tables];
      for (int k = 0; k < tables; k++) {
        int arity = p[i++];
        tableOffset[k] = p[i++];
        tableAttrs[k] = new int[arity];
        tableSizes[k] = new int[arity];
        for (int j = 0; j < arity; j++) {
          tableAttrs[k][j] = p[i++];
        }
        for (int j = 0; j < arity; j++) {
          tableSizes[k][j] = p[i++];
        }
      }
      statusWord = new int[columns];
      statusShift = new int[columns];
      statusMask = new long[words];
      for (int c = 0; c < columns; c++) {
        statusWord[c] = p[i++];
        statusShift[c] = p[i++];
        statusMask[statusWord[c]] |= ((1L << statusBits) - 1) << statusShift[c];
      }
      luts = java.util.Arrays.copyOfRange(p, i, p.length);
    }

    /** Cells, then the row count, then (out of domain, null failure, not a number) per column. */
    int length() {
      return cells + 1 + TALLIES * statusWord.length;
    }

    /**
     * One partition's counts. Rows are read a block at a time into word columns and decoded into
     * per-attribute code columns; then each table is counted over the block (one small table hot in
     * cache at a time) into int counters, added to the long result before they could overflow.
     */
    long[] count(Iterator<InternalRow> rows) {
      long[] acc = new long[length()];
      int[] cellCounts = new int[cells];
      long[][] block = new long[words][BLOCK];
      int[][] code = new int[attrWord.length][BLOCK];
      int[] index = new int[BLOCK];
      long fieldMask = (1L << statusBits) - 1;
      long n = 0;
      long sinceFlush = 0;
      while (rows.hasNext()) {
        int size = 0;
        while (size < BLOCK && rows.hasNext()) {
          InternalRow row = rows.next();
          for (int j = 0; j < words; j++) {
            block[j][size] = row.getLong(j);
          }
          size++;
        }
        for (int j = 0; j < words; j++) {
          long[] column = block[j];
          long mask = statusMask[j];
          for (int r = 0; r < size; r++) {
            if ((column[r] & mask) != 0) {
              tallyStatuses(acc, j, column[r], fieldMask);
            }
          }
        }
        for (int a = 0; a < attrWord.length; a++) {
          long[] column = block[attrWord[a]];
          int[] out = code[a];
          int shift = attrShift[a];
          long mask = attrMask[a];
          int base = attrLut[a];
          for (int r = 0; r < size; r++) {
            out[r] = luts[base + (int) ((column[r] >>> shift) & mask)];
          }
        }
        for (int k = 0; k < tableAttrs.length; k++) {
          int[] attrs = tableAttrs[k];
          int[] sizes = tableSizes[k];
          int offset = tableOffset[k];
          int[] first = code[attrs[0]];
          if (attrs.length == 1) {
            for (int r = 0; r < size; r++) {
              cellCounts[offset + first[r]]++;
            }
            continue;
          }
          System.arraycopy(first, 0, index, 0, size);
          for (int j = 1; j < attrs.length; j++) {
            int[] next = code[attrs[j]];
            int width = sizes[j];
            for (int r = 0; r < size; r++) {
              index[r] = index[r] * width + next[r];
            }
          }
          for (int r = 0; r < size; r++) {
            cellCounts[offset + index[r]]++;
          }
        }
        n += size;
        sinceFlush += size;
        if (sinceFlush > Integer.MAX_VALUE - BLOCK) {
          flush(cellCounts, acc);
          sinceFlush = 0;
        }
      }
      flush(cellCounts, acc);
      acc[cells] = n;
      return acc;
    }

    private void tallyStatuses(long[] acc, int word, long w, long fieldMask) {
      for (int c = 0; c < statusWord.length; c++) {
        if (statusWord[c] != word) {
          continue;
        }
        long status = (w >>> statusShift[c]) & fieldMask;
        if (status == statusOutside) {
          acc[cells + 1 + TALLIES * c]++;
        } else if (status == statusNull) {
          acc[cells + 2 + TALLIES * c]++;
        } else if (status == statusNotANumber) {
          acc[cells + 3 + TALLIES * c]++;
        }
      }
    }

    private static void flush(int[] cellCounts, long[] acc) {
      for (int i = 0; i < cellCounts.length; i++) {
        acc[i] += cellCounts[i];
        cellCounts[i] = 0;
      }
    }
  }
}

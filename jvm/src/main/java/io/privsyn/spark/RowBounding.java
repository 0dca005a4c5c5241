package io.privsyn.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Contribution bounding without a sort: per group (a privacy id), the rows of the smallest keys.
 *
 * <p>The caller ({@code privsyn_spark/measure/bounding.py}) hash-partitions the rows by the group
 * columns (one shuffle, so every group sits in one partition), then each partition streams its rows
 * once: per group a bounded max-heap of the {@code keep} smallest (unique, 64-bit) keys, in a hash
 * map, so a partition holds at most (its groups) x {@code keep} rows and a group of 10,000 rows only
 * ever {@code keep}. When the partition is read, every group's kept rows are emitted with their rank
 * by key (1 = smallest): the same rows, and the same ranks, as {@code row_number()} over a window
 * partitioned by the group and ordered by the key. A row whose null flag is set is a group of its own
 * and goes straight out with rank 1.
 *
 * <p>Like the counter, the driver passes the bounding version it expects and its Spark version; the
 * driver and every executor check them against this jar, so another jar or Spark fails the job with a
 * message starting with {@link MarginalCounter#ERROR}.
 */
public final class RowBounding {
  /** Version of this entry point's contract; {@code jvm_counter.BOUNDING_VERSION} in Python must be the same. */
  public static final int VERSION = 1;

  private RowBounding() {}

  /**
   * The rows of the {@code keep} smallest {@code keyColumn} per group of {@code groupColumns} (lazy: a
   * {@code mapPartitions} over {@code partitioned}, which must be hash-partitioned by those columns),
   * with an int column {@code rankColumn} appended (1..keep by key within the group).
   */
  public static Dataset<Row> keepSmallest(Dataset<Row> partitioned, String[] groupColumns, String keyColumn,
      String nullColumn, String rankColumn, int keep, int version, String driverSpark) {
    checkVersion(version);
    MarginalCounter.checkVersions(MarginalCounter.BUILT_FOR, driverSpark, MarginalCounter.runningSpark(), "driver");
    if (keep < 1) {
      throw new IllegalArgumentException(MarginalCounter.ERROR + "keep must be at least 1, not " + keep);
    }
    StructType schema = partitioned.schema();
    int[] groups = new int[groupColumns.length];
    for (int i = 0; i < groups.length; i++) {
      groups[i] = schema.fieldIndex(groupColumns[i]);
    }
    StructType out = schema.add(rankColumn, DataTypes.IntegerType, false);
    KeepSmallest function = new KeepSmallest(groups, schema.fieldIndex(keyColumn), schema.fieldIndex(nullColumn),
        keep, schema.length(), driverSpark, version);
    return partitioned.mapPartitions(function, Encoders.row(out));
  }

  static void checkVersion(int version) {
    if (version != VERSION) {
      throw new IllegalStateException(MarginalCounter.ERROR + "the caller expects row bounding version " + version
          + ", this jar has version " + VERSION + ": the jar on this node is not the one privsyn-spark ships");
    }
  }

  /** One partition's bounding, after checking this executor's Spark and jar. A named class, not a lambda. */
  static final class KeepSmallest implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int[] groups;
    private final int key;
    private final int nullFlag;
    private final int keep;
    private final int width;
    private final String driverSpark;
    private final int version;

    KeepSmallest(int[] groups, int key, int nullFlag, int keep, int width, String driverSpark, int version) {
      this.groups = groups;
      this.key = key;
      this.nullFlag = nullFlag;
      this.keep = keep;
      this.width = width;
      this.driverSpark = driverSpark;
      this.version = version;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
      checkVersion(version);
      MarginalCounter.checkVersions(MarginalCounter.BUILT_FOR, driverSpark, MarginalCounter.runningSpark(), "executor");
      return new Bounded(rows);
    }

    private Object groupOf(Row row) {
      if (groups.length == 1) {
        return row.get(groups[0]);
      }
      Object[] values = new Object[groups.length];
      for (int i = 0; i < values.length; i++) {
        values[i] = row.get(groups[i]);
      }
      return Arrays.asList(values);
    }

    private Row ranked(Row row, int rank) {
      Object[] values = new Object[width + 1];
      for (int i = 0; i < width; i++) {
        values[i] = row.get(i);
      }
      values[width] = rank;
      return RowFactory.create(values);
    }

    /**
     * Streams the null-flag rows while it reads the partition, then every group's kept rows (each
     * group's heap is dropped once emitted).
     */
    private final class Bounded implements Iterator<Row> {
      private final Iterator<Row> in;
      private final Map<Object, Heap> heaps = new HashMap<>();
      private Iterator<Heap> drained;
      private List<Row> pending = new ArrayList<>();
      private int next;
      private Row single;

      Bounded(Iterator<Row> in) {
        this.in = in;
      }

      @Override
      public boolean hasNext() {
        while (single == null && next == pending.size()) {
          if (drained == null) {
            if (!in.hasNext()) {
              drained = heaps.values().iterator();
              continue;
            }
            Row row = in.next();
            if (row.getBoolean(nullFlag)) {
              single = ranked(row, 1);
            } else {
              heaps.computeIfAbsent(groupOf(row), g -> new Heap(keep)).offer(row.getLong(key), row);
            }
          } else if (drained.hasNext()) {
            Heap heap = drained.next();
            drained.remove();
            pending = heap.drain();
            next = 0;
          } else {
            return false;
          }
        }
        return true;
      }

      @Override
      public Row next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        if (single != null) {
          Row row = single;
          single = null;
          return row;
        }
        return pending.get(next++);
      }

      private final class Heap {
        private final int capacity;
        private long[] keys;
        private Row[] kept;
        private int size;

        Heap(int capacity) {
          this.capacity = capacity;
          int start = Math.min(capacity, 4);
          keys = new long[start];
          kept = new Row[start];
        }

        /** Keeps {@code row} if its key is among the {@code capacity} smallest seen (a max-heap on the key). */
        void offer(long k, Row row) {
          if (size < capacity) {
            if (size == keys.length) {
              int grown = Math.min(capacity, 2 * size);
              keys = Arrays.copyOf(keys, grown);
              kept = Arrays.copyOf(kept, grown);
            }
            int i = size++;
            while (i > 0) {
              int parent = (i - 1) >>> 1;
              if (keys[parent] >= k) {
                break;
              }
              keys[i] = keys[parent];
              kept[i] = kept[parent];
              i = parent;
            }
            keys[i] = k;
            kept[i] = row;
          } else if (k < keys[0]) {
            int i = 0;
            while (true) {
              int child = 2 * i + 1;
              if (child >= size) {
                break;
              }
              if (child + 1 < size && keys[child + 1] > keys[child]) {
                child++;
              }
              if (keys[child] <= k) {
                break;
              }
              keys[i] = keys[child];
              kept[i] = kept[child];
              i = child;
            }
            keys[i] = k;
            kept[i] = row;
          }
        }

        /** The kept rows, ranked by key (1 = smallest). */
        List<Row> drain() {
          Integer[] order = new Integer[size];
          for (int i = 0; i < size; i++) {
            order[i] = i;
          }
          Arrays.sort(order, (a, b) -> Long.compare(keys[a], keys[b]));
          List<Row> out = new ArrayList<>(size);
          for (int r = 0; r < size; r++) {
            out.add(ranked(kept[order[r]], r + 1));
          }
          return out;
        }
      }
    }
  }
}

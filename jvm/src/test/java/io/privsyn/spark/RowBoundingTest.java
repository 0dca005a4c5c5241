package io.privsyn.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.junit.jupiter.api.Test;

/** Row bounding's per-partition selection against a brute force: the K smallest keys per group, ranked. */
class RowBoundingTest {
  private static String spark() {
    return MarginalCounter.minor(MarginalCounter.BUILT_FOR);
  }

  /** Rows (id a, id b, key, null flag, payload); groups by (a, b). */
  private static List<Row> table(Random random, int n) {
    List<Row> rows = new ArrayList<>();
    Set<Long> keys = new HashSet<>();
    for (int r = 0; r < n; r++) {
      long key;
      do {
        key = random.nextLong();
      } while (!keys.add(key));
      boolean heavy = random.nextInt(4) == 0;  // a quarter of the rows in one group of many rows
      Object a = heavy ? (Object) 7L : (Object) (long) random.nextInt(300);
      Object b = heavy ? "h" : (random.nextBoolean() ? "x" : "y");
      boolean isNull = random.nextInt(50) == 0;
      rows.add(RowFactory.create(isNull ? null : a, b, key, isNull, r));
    }
    return rows;
  }

  @Test
  void keepsTheSmallestKeysPerGroupRankedLikeRowNumber() {
    Random random = new Random(11);
    List<Row> rows = table(random, 20_000);
    for (int keep : new int[] {1, 2, 6, 51}) {
      RowBounding.KeepSmallest function =
          new RowBounding.KeepSmallest(new int[] {0, 1}, 2, 3, keep, 5, spark(), RowBounding.VERSION);
      Map<Integer, Integer> got = new HashMap<>();  // payload -> rank
      Iterator<Row> out = function.call(rows.iterator());
      int nulls = 0;
      while (out.hasNext()) {
        Row row = out.next();
        assertEquals(6, row.length());
        assertEquals(null, got.put(row.getInt(4), row.getInt(5)));
        nulls += row.getBoolean(3) ? 1 : 0;
      }
      // brute force: per group, sort by key, rank; null-flag rows rank 1 on their own
      Map<List<Object>, List<Row>> groups = new HashMap<>();
      Map<Integer, Integer> expected = new HashMap<>();
      int expectedNulls = 0;
      for (Row row : rows) {
        if (row.getBoolean(3)) {
          expected.put(row.getInt(4), 1);
          expectedNulls++;
        } else {
          groups.computeIfAbsent(List.of(row.get(0), row.get(1)), g -> new ArrayList<>()).add(row);
        }
      }
      for (List<Row> group : groups.values()) {
        group.sort(Comparator.comparingLong(r -> r.getLong(2)));
        for (int i = 0; i < Math.min(keep, group.size()); i++) {
          expected.put(group.get(i).getInt(4), i + 1);
        }
      }
      assertEquals(expected, got, "keep " + keep);
      assertEquals(expectedNulls, nulls);
    }
  }

  @Test
  void oneGroupColumnAndAnEmptyPartition() {  // keys: 7919 r mod 1000, a permutation of 0..999
    List<Row> rows = new ArrayList<>();
    for (int r = 0; r < 1000; r++) {
      rows.add(RowFactory.create((long) (r % 3), (long) ((r * 7919L) % 1000), false));
    }
    RowBounding.KeepSmallest function =
        new RowBounding.KeepSmallest(new int[] {0}, 1, 2, 4, 3, spark(), RowBounding.VERSION);
    Map<Long, List<Long>> kept = new HashMap<>();
    function.call(rows.iterator()).forEachRemaining(
        row -> kept.computeIfAbsent(row.getLong(0), g -> new ArrayList<>()).add(row.getLong(1) * 10 + row.getInt(3)));
    for (long g = 0; g < 3; g++) {
      List<Long> keys = new ArrayList<>();
      for (Row row : rows) {
        if (row.getLong(0) == g) {
          keys.add(row.getLong(1));
        }
      }
      keys.sort(null);
      List<Long> expected = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        expected.add(keys.get(i) * 10 + i + 1);
      }
      List<Long> got = kept.get(g);
      got.sort(null);
      assertEquals(expected, got);
    }
    assertTrue(!function.call(new ArrayList<Row>().iterator()).hasNext());
  }

  @Test
  void anotherVersionOrSparkIsRefused() {
    RowBounding.KeepSmallest stale =
        new RowBounding.KeepSmallest(new int[] {0}, 1, 2, 4, 3, spark(), RowBounding.VERSION + 1);
    IllegalStateException err = assertThrows(IllegalStateException.class, () -> stale.call(new ArrayList<Row>().iterator()));
    assertTrue(err.getMessage().startsWith(MarginalCounter.ERROR), err.getMessage());
    RowBounding.KeepSmallest other = new RowBounding.KeepSmallest(new int[] {0}, 1, 2, 4, 3, "3.5", RowBounding.VERSION);
    assertThrows(IllegalStateException.class, () -> other.call(new ArrayList<Row>().iterator()));
  }
}

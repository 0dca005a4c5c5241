package io.privsyn.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.junit.jupiter.api.Test;

/** The counter's plan decoding, counting and version checks, against a brute-force reference. */
class MarginalCounterTest {
  // two encoded columns in one word: a (3 codes, 4 bits at offset 0), b (2 codes, 3 bits at offset 4);
  // the status is the low 2 bits of each field (0 ok, 1 out of domain, 2 null failure, 3 not a number)
  private static final int[] BODY = {
    1, 2, 2, 2, 8, 2, 1, 2, 3,       // words, attrs, tables, columns, cells, status bits/outside/null/NaN
    0, 2, 2, 0,                      // a: word, code shift, code bits, lut start
    0, 6, 1, 3,                      // b
    2, 0, 0, 1, 3, 2,                // table (a, b): arity, offset, attrs, sizes
    1, 6, 1, 2,                      // table (b)
    0, 0, 0, 4,                      // status fields: (word, offset) of a, of b
    0, 2, 1, 0, 1                    // luts: a recoded 0->0, 1->2, 2->1; b identity
  };

  private static byte[] plan(int magic, int version, int... body) {
    ByteBuffer buf = ByteBuffer.allocate(4 * (4 + body.length)).order(ByteOrder.LITTLE_ENDIAN);
    buf.putInt(magic).putInt(version).putInt(4).putInt(2);
    for (int v : body) {
      buf.putInt(v);
    }
    return buf.array();
  }

  @Test
  void countsMatchABruteForceReferenceOverSeveralBlocks() {
    MarginalCounter.Layout layout =
        new MarginalCounter.Layout(plan(MarginalCounter.MAGIC, MarginalCounter.PLAN_VERSION, BODY));
    int[] lutA = {0, 2, 1};
    long[] expected = new long[layout.length()];
    List<InternalRow> rows = new ArrayList<>();
    Random random = new Random(7);
    int n = 10_000;  // more than two blocks of 4096
    for (int r = 0; r < n; r++) {
      int a = random.nextInt(3), b = random.nextInt(2);
      int sa = random.nextInt(10) == 0 ? 1 + 2 * random.nextInt(2) : 0, sb = random.nextInt(20) == 0 ? 2 : 0;
      long word = ((long) a << 2 | sa) | ((long) (b << 2 | sb) << 4);
      rows.add(new GenericInternalRow(new Object[] {word}));
      expected[lutA[a] * 2 + b]++;
      expected[6 + b]++;
      expected[8 + 1] += sa == 1 ? 1 : 0;   // a out of domain
      expected[8 + 3] += sa == 3 ? 1 : 0;   // a not a number
      expected[8 + 5] += sb == 2 ? 1 : 0;   // b null failure
    }
    expected[8] = n;
    assertEquals(8 + 1 + 6, layout.length());
    assertArrayEquals(expected, layout.count(rows.iterator()));
    assertArrayEquals(new long[layout.length()], layout.count(new ArrayList<InternalRow>().iterator()));
  }

  @Test
  void aPlanFromAnotherVersionIsRefused() {
    IllegalStateException err = assertThrows(IllegalStateException.class,
        () -> new MarginalCounter.Layout(plan(MarginalCounter.MAGIC, MarginalCounter.PLAN_VERSION + 1, BODY)));
    assertTrue(err.getMessage().startsWith(MarginalCounter.ERROR), err.getMessage());
    assertThrows(IllegalArgumentException.class, () -> new MarginalCounter.Layout(plan(0, 1, BODY)));
  }

  @Test
  void anotherSparkThanTheJarWasBuiltForIsRefused() {
    MarginalCounter.checkVersions("4.2.0", "4.2", "4.2.1", "executor");  // same minor: fine
    IllegalStateException err = assertThrows(IllegalStateException.class,
        () -> MarginalCounter.checkVersions("4.2.0", "4.2", "4.1.1", "executor"));
    assertTrue(err.getMessage().contains("built for Spark 4.2.0; the driver runs Spark 4.2, this executor runs Spark 4.1.1"), err.getMessage());
    assertThrows(IllegalStateException.class,
        () -> MarginalCounter.checkVersions("4.2.0", "4.1", "4.2.0", "driver"));
  }

  @Test
  void theJarKnowsTheSparkItWasBuiltFor() {
    assertEquals(MarginalCounter.minor(MarginalCounter.runningSpark()), MarginalCounter.minor(MarginalCounter.BUILT_FOR));
  }
}

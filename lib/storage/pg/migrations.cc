#include "lib/storage/pg/migrations.h"

#include "lib/storage/pg/pg_raw_outputs.h"

namespace farm::storage {
namespace {

// Arbitrary constant shared by every process that migrates this schema.
constexpr long long kMigrationLockKey = 0x6661726d6d696772;  // "farmmigr"

// Enum columns hold the proto enum numbers (iommufarm.v1.*).
const char* const kV1Schema = R"SQL(
CREATE TABLE catalogs (
  name        text PRIMARY KEY,
  source      text NOT NULL DEFAULT '',
  loaded_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE catalog_commits (
  catalog     text NOT NULL REFERENCES catalogs(name) ON DELETE CASCADE,
  idx         integer NOT NULL,
  id          text NOT NULL,
  subject     text NOT NULL DEFAULT '',
  set         jsonb NOT NULL DEFAULT '{}'::jsonb,
  PRIMARY KEY (catalog, idx),
  UNIQUE (catalog, id)
);

CREATE TABLE matrices (
  id               bigserial PRIMARY KEY,
  name             text NOT NULL,
  spec_yaml        text NOT NULL,
  catalog          text NOT NULL DEFAULT '',
  platform         text NOT NULL DEFAULT '',
  executor         smallint NOT NULL DEFAULT 0,
  analysis_bisect  boolean NOT NULL DEFAULT false,
  submitted_by     text NOT NULL DEFAULT '',
  idempotency_key  text UNIQUE,
  total_jobs       bigint NOT NULL DEFAULT 0,
  cancelled        boolean NOT NULL DEFAULT false,
  cancel_reason    text NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
  id               bigserial PRIMARY KEY,
  name             text NOT NULL UNIQUE,
  session          text NOT NULL,
  capabilities     jsonb NOT NULL DEFAULT '[]'::jsonb,   -- [{name, version}]
  executors        smallint[] NOT NULL DEFAULT '{}',     -- Executor numbers it can run
  host             jsonb NOT NULL DEFAULT '{}'::jsonb,
  slots            integer NOT NULL DEFAULT 1,
  registered_at    timestamptz NOT NULL DEFAULT now(),
  last_heartbeat   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  matrix_id        bigint NOT NULL REFERENCES matrices(id) ON DELETE CASCADE,
  catalog          text NOT NULL DEFAULT '',
  commit_id        text NOT NULL,
  commit_index     integer NOT NULL DEFAULT 0,
  platform         text NOT NULL,
  workload         text NOT NULL,
  params           jsonb NOT NULL DEFAULT '{}'::jsonb,
  mode             smallint NOT NULL,
  repeat           integer NOT NULL DEFAULT 0,
  executor         smallint NOT NULL,
  priority         integer NOT NULL DEFAULT 0,
  kind             smallint NOT NULL DEFAULT 1,
  state            smallint NOT NULL DEFAULT 1,
  attempt          integer NOT NULL DEFAULT 0,   -- attempts spent incl. the current lease
  max_attempts     integer NOT NULL DEFAULT 3,
  failure_reason   text NOT NULL DEFAULT '',
  model_set        jsonb NOT NULL DEFAULT '{}'::jsonb,
  seed             bigint NOT NULL DEFAULT 0,    -- uint64 bit pattern
  lease_agent      bigint,
  lease_owner      text NOT NULL DEFAULT '',
  lease_token      text,
  lease_expires_at timestamptz,
  not_before       timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  finished_at      timestamptz
);
-- The queue: claim order is priority desc, id among queued jobs.
CREATE INDEX jobs_queue_idx ON jobs (priority DESC, id) WHERE state = 1;
CREATE INDEX jobs_matrix_state_idx ON jobs (matrix_id, state);
CREATE INDEX jobs_lease_expiry_idx ON jobs (lease_expires_at) WHERE state = 2;
CREATE INDEX jobs_lease_agent_idx ON jobs (lease_agent) WHERE state = 2;

-- One row per accepted (job, attempt): the primary key is the idempotency fence.
CREATE TABLE results (
  job_id        bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  attempt       integer NOT NULL,
  matrix_id     bigint NOT NULL,
  agent_id      bigint,
  agent         text NOT NULL DEFAULT '',
  samples       jsonb NOT NULL DEFAULT '[]'::jsonb,  -- [{metric, value, unit, phase}]
  raw_output    text NOT NULL DEFAULT '',
  raw_format    text NOT NULL DEFAULT '',
  host          jsonb NOT NULL DEFAULT '{}'::jsonb,
  tool_version  text NOT NULL DEFAULT '',
  wall_time_ns  bigint NOT NULL DEFAULT 0,
  finished_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, attempt)
);
CREATE INDEX results_matrix_idx ON results (matrix_id, job_id);

-- Analyzer tables (filled by farm-analyzer; read/triaged via AnalysisService).
CREATE TABLE regressions (
  id               bigserial PRIMARY KEY,
  state            smallint NOT NULL DEFAULT 1,
  change_class     smallint NOT NULL DEFAULT 0,
  direction        smallint NOT NULL DEFAULT 1,
  platform         text NOT NULL DEFAULT '',
  workload         text NOT NULL DEFAULT '',
  metric           text NOT NULL DEFAULT '',
  mode             smallint NOT NULL DEFAULT 0,
  overhead_series  boolean NOT NULL DEFAULT false,
  catalog          text NOT NULL DEFAULT '',
  last_good        text NOT NULL DEFAULT '',
  first_bad        text NOT NULL DEFAULT '',
  magnitude        double precision NOT NULL DEFAULT 0,
  p_value          double precision NOT NULL DEFAULT 1,
  per_mode         jsonb NOT NULL DEFAULT '[]'::jsonb,  -- [{mode, before, after, relative_change, p_value}]
  bisect_id        bigint,
  culprit_id       text NOT NULL DEFAULT '',
  culprit_subject  text NOT NULL DEFAULT '',
  alert_firing     boolean NOT NULL DEFAULT false,
  detected_at      timestamptz NOT NULL DEFAULT now(),
  note             text NOT NULL DEFAULT '',
  matrix_id        bigint,
  series_key       text NOT NULL DEFAULT '',  -- analyzer's dedup key for a series
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX regressions_matrix_idx ON regressions (matrix_id);

CREATE TABLE bisects (
  id               bigserial PRIMARY KEY,
  regression_id    bigint NOT NULL REFERENCES regressions(id) ON DELETE CASCADE,
  state            text NOT NULL DEFAULT 'running',  -- running, done, failed
  last_good        text NOT NULL DEFAULT '',
  first_bad        text NOT NULL DEFAULT '',
  culprit_id       text NOT NULL DEFAULT '',
  culprit_subject  text NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bisects_regression_idx ON bisects (regression_id);

CREATE TABLE bisect_steps (
  bisect_id        bigint NOT NULL REFERENCES bisects(id) ON DELETE CASCADE,
  step             integer NOT NULL,
  commit_id        text NOT NULL,
  commit_index     integer NOT NULL DEFAULT 0,
  verdict          text NOT NULL DEFAULT 'pending',
  repeats          integer NOT NULL DEFAULT 0,
  mean             double precision NOT NULL DEFAULT 0,
  p_value          double precision NOT NULL DEFAULT 1,
  relative_change  double precision NOT NULL DEFAULT 0,
  matrix_id        bigint,        -- jobs the analyzer submitted for this step
  at               timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (bisect_id, step)
);

CREATE TABLE alerts (
  id               bigserial PRIMARY KEY,
  regression_id    bigint REFERENCES regressions(id) ON DELETE CASCADE,
  name             text NOT NULL DEFAULT '',
  labels           jsonb NOT NULL DEFAULT '{}'::jsonb,
  annotations      jsonb NOT NULL DEFAULT '{}'::jsonb,
  firing           boolean NOT NULL DEFAULT true,
  starts_at        timestamptz NOT NULL DEFAULT now(),
  ends_at          timestamptz,
  last_sent_at     timestamptz
);

-- Analyzer cursor and other small state, e.g. ('last_result_job_id', '123').
CREATE TABLE analyzer_state (
  key         text PRIMARY KEY,
  value       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
)SQL";

// Cheap queue gauges and change notifications for watchers.
//  - Terminal jobs (succeeded 3, failed 4, cancelled 5) only ever grow, so
//    their totals are kept in job_state_totals, changed by the same statement
//    that moves a job, instead of counting a table that grows with history.
//    Rows are sharded by backend so concurrent reporters do not queue on one
//    hot row; a reader sums the shards. Non-terminal states are counted
//    through the partial indexes on state = 1 / state = 2.
//  - Every statement that changes job states raises one NOTIFY farm_matrix
//    per matrix it touched (payload: the matrix id), so a scheduler's single
//    listener can wake the WatchMatrix streams of that matrix. Statement-level
//    with transition tables: a 100,000-job cancel is one trigger call.
// Jobs are only ever inserted as queued (state default), so INSERT needs no
// trigger; DELETE (a cascaded matrix delete) takes its terminal rows off.
const char* const kV2QueueTotalsAndNotify = R"SQL(
CREATE TABLE job_state_totals (
  state  smallint NOT NULL,
  shard  smallint NOT NULL,
  jobs   bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (state, shard)
);
INSERT INTO job_state_totals (state, shard, jobs)
  SELECT s, sh, 0 FROM generate_series(3, 5) s, generate_series(0, 15) sh;
UPDATE job_state_totals t SET jobs = c.n
  FROM (SELECT state, count(*) AS n FROM jobs WHERE state >= 3 GROUP BY state) c
  WHERE t.state = c.state AND t.shard = 0;

CREATE FUNCTION farm_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := pg_backend_pid() % 16;
  v_row record;
BEGIN
  -- Ordered by state so two statements on one shard lock rows in one order.
  FOR v_row IN
    SELECT x.state, sum(x.delta) AS delta FROM (
      SELECT n.state, 1 AS delta FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE n.state <> o.state AND n.state >= 3
      UNION ALL
      SELECT o.state, -1 FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE n.state <> o.state AND o.state >= 3) x
    GROUP BY x.state ORDER BY x.state
  LOOP
    IF v_row.delta <> 0 THEN
      UPDATE job_state_totals SET jobs = jobs + v_row.delta
        WHERE state = v_row.state AND shard = v_shard;
    END IF;
  END LOOP;
  FOR v_row IN
    SELECT DISTINCT n.matrix_id FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.state <> o.state ORDER BY n.matrix_id
  LOOP
    PERFORM pg_notify('farm_matrix', v_row.matrix_id::text);
  END LOOP;
  RETURN NULL;
END $$;

CREATE FUNCTION farm_jobs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := pg_backend_pid() % 16;
  v_row record;
BEGIN
  FOR v_row IN
    SELECT state, count(*) AS n FROM old_rows WHERE state >= 3 GROUP BY state ORDER BY state
  LOOP
    UPDATE job_state_totals SET jobs = jobs - v_row.n WHERE state = v_row.state AND shard = v_shard;
  END LOOP;
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_state_totals_upd AFTER UPDATE ON jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION farm_jobs_updated();
CREATE TRIGGER jobs_state_totals_del AFTER DELETE ON jobs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION farm_jobs_deleted();
)SQL";

// The analyzer's metric rank as columns of regressions (it used to live only
// in the bisect state and the free-text note, which a person's triage note
// overwrites). Rows written before are backfilled from that bisect state;
// rows without one predate ranking and count as primary.
const char* const kV3RegressionMetricRank = R"SQL(
ALTER TABLE regressions
  ADD COLUMN metric_rank text NOT NULL DEFAULT 'primary'
    CHECK (metric_rank IN ('primary', 'secondary')),
  ADD COLUMN primary_metrics text[] NOT NULL DEFAULT '{}';
UPDATE regressions g
  SET metric_rank = coalesce(st.value->>'metric_rank', 'primary'),
      primary_metrics = coalesce(ARRAY(SELECT jsonb_array_elements_text(
                                   CASE WHEN jsonb_typeof(st.value->'primary_metrics') = 'array'
                                        THEN st.value->'primary_metrics' ELSE '[]'::jsonb END)),
                                 '{}')
  FROM analyzer_state st
  WHERE st.key = 'bisect:' || g.bisect_id
    AND st.value->>'metric_rank' IN ('primary', 'secondary');
)SQL";

// Every culprit of a bisect: a range holding more than one change is split
// and each part bisected to its own first bad commit (bisects.culprit_id
// keeps the one with the largest share). share: its part's change over the
// whole range's change; relative_change: its part's change relative to the
// range's last good mean.
const char* const kV4BisectCulprits = R"SQL(
CREATE TABLE bisect_culprits (
  bisect_id        bigint NOT NULL REFERENCES bisects(id) ON DELETE CASCADE,
  ordinal          integer NOT NULL,        -- 1-based, in commit order
  commit_id        text NOT NULL,
  commit_index     integer NOT NULL DEFAULT 0,
  last_good        text NOT NULL DEFAULT '',
  subject          text NOT NULL DEFAULT '',
  relative_change  double precision NOT NULL DEFAULT 0,
  share            double precision NOT NULL DEFAULT 1,
  PRIMARY KEY (bisect_id, ordinal)
);
)SQL";

// API tokens are stored as their SHA-256 only; a name is unique among live
// (unrevoked) tokens. agent_principals: the principal that registered each
// agent name, so another principal cannot take a connected agent's name.
const char* const kV5ApiTokens = R"SQL(
CREATE TABLE api_tokens (
  id            bigserial PRIMARY KEY,
  name          text NOT NULL,
  role          text NOT NULL,
  token_sha256  text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE agent_principals (
  name        text PRIMARY KEY,
  principal   text NOT NULL,
  claimed_at  timestamptz NOT NULL DEFAULT now()
);
)SQL";

// Triage that acts: the Alertmanager silence of an acknowledged regression
// (expired when it is re-opened or closed), and the analyzer's check that a
// regression marked fixed is back to its old level at a later commit.
const char* const kV6RegressionTriage = R"SQL(
ALTER TABLE regressions
  ADD COLUMN silence_id        text NOT NULL DEFAULT '',
  ADD COLUMN fix_check         text NOT NULL DEFAULT ''
    CHECK (fix_check IN ('', 'checking', 'back', 'not-back', 'no-later-commit')),
  ADD COLUMN fix_check_commit  text NOT NULL DEFAULT '',
  ADD COLUMN fix_check_change  double precision NOT NULL DEFAULT 0;
)SQL";

// The claim's round robin across matrices: fair_rank is a job's position
// within its matrix, so at equal priority the k-th job of every matrix is
// claimed before the (k+1)-th of any, and a small matrix is not starved
// behind a large one submitted before it. Existing rows are ranked by id.
const char* const kV7ClaimFairRank = R"SQL(
ALTER TABLE jobs ADD COLUMN fair_rank integer NOT NULL DEFAULT 0;
UPDATE jobs j SET fair_rank = r.rank
  FROM (SELECT id, (row_number() OVER (PARTITION BY matrix_id ORDER BY id) - 1)::int AS rank
        FROM jobs) r
  WHERE j.id = r.id AND r.rank <> 0;
DROP INDEX jobs_queue_idx;
CREATE INDEX jobs_queue_idx ON jobs (priority DESC, fair_rank, id) WHERE state = 1;
)SQL";

// Documents every job of a matrix shares, stored once and referenced instead
// of copied into each job row: the spec's `set:` (matrices.model_set) and
// each commit's accumulated catalog settings (matrix_commit_settings). A
// job's model_set reads as jobs.model_set || commit settings ||
// matrices.model_set (kJobCols); rows written before keep their full copy in
// jobs.model_set and find nothing to add.
const char* const kV8SharedModelSets = R"SQL(
ALTER TABLE matrices ADD COLUMN model_set jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE TABLE matrix_commit_settings (
  matrix_id     bigint NOT NULL REFERENCES matrices(id) ON DELETE CASCADE,
  commit_index  integer NOT NULL,
  settings      jsonb NOT NULL,
  PRIMARY KEY (matrix_id, commit_index)
);
)SQL";

// A lease held through its agent's reboot (kexec): the hold belongs to the
// lease whose token it names, so a later grant (a fresh token) is never
// held by accident.
const char* const kV9LeaseHold = R"SQL(
ALTER TABLE jobs ADD COLUMN lease_hold_token text;
)SQL";

// Which executor's runs decided a regression's confirmation step (emulator,
// or fio / iozone on real kernels when the matrix asked for it), the first
// matrix of that step, and a sentence on it.
const char* const kV10RegressionConfirmedBy = R"SQL(
ALTER TABLE regressions
  ADD COLUMN confirmed_by       text NOT NULL DEFAULT '',
  ADD COLUMN confirm_matrix_id  bigint NOT NULL DEFAULT 0,
  ADD COLUMN confirm_note       text NOT NULL DEFAULT '';
)SQL";

// The job-state trigger in one pass over each transition table, with no
// join. The old function joined new_rows to old_rows three times; PL/pgSQL
// plans such a query once per connection, with the transition tables' sizes
// of its first firing, so a connection whose first UPDATE of jobs touched no
// rows (re-registration expiring nothing) kept a nested-loop plan and paid
// O(rows^2) per statement for good: a 200-job claim took 20-30 ms instead of
// 6-10 ms. The net change of each (matrix, state) count is the same
// information: totals move by it, and a matrix is notified when one of its
// counts changed.
const char* const kV11LinearStateTrigger = R"SQL(
CREATE OR REPLACE FUNCTION farm_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := pg_backend_pid() % 16;
  v_row record;
  v_matrix bigint := NULL;
  v_delta bigint[] := '{0,0,0,0,0}';
BEGIN
  FOR v_row IN
    SELECT x.matrix_id, x.state, sum(x.delta) AS delta FROM (
      SELECT matrix_id, state, 1 AS delta FROM new_rows
      UNION ALL
      SELECT matrix_id, state, -1 FROM old_rows) x
    GROUP BY x.matrix_id, x.state HAVING sum(x.delta) <> 0
    ORDER BY x.matrix_id
  LOOP
    IF v_matrix IS DISTINCT FROM v_row.matrix_id THEN
      v_matrix := v_row.matrix_id;
      PERFORM pg_notify('farm_matrix', v_matrix::text);
    END IF;
    IF v_row.state BETWEEN 3 AND 5 THEN
      v_delta[v_row.state] := v_delta[v_row.state] + v_row.delta;
    END IF;
  END LOOP;
  -- In state order, so two statements on one shard lock rows in one order.
  FOR s IN 3..5 LOOP
    IF v_delta[s] <> 0 THEN
      UPDATE job_state_totals SET jobs = jobs + v_delta[s] WHERE state = s AND shard = v_shard;
    END IF;
  END LOOP;
  RETURN NULL;
END $$;
)SQL";

// Large workload params stored once per matrix, as `set:` is (migration
// 8): a job row references its matrix's copy by workload_index (-1: the
// row holds its own params, as every row written before does).
// kJobParamsSql reads either.
const char* const kV12SharedWorkloadParams = R"SQL(
CREATE TABLE matrix_workloads (
  matrix_id       bigint NOT NULL REFERENCES matrices(id) ON DELETE CASCADE,
  workload_index  integer NOT NULL,
  params          jsonb NOT NULL,
  PRIMARY KEY (matrix_id, workload_index)
);
ALTER TABLE jobs ADD COLUMN workload_index integer NOT NULL DEFAULT -1;
)SQL";

// A real job may wait for the kernel build job that makes its kernel: 0 for
// none (no foreign key, so the COPY of a matrix's jobs stays one statement;
// build jobs are never deleted before the jobs of their matrix). Build jobs
// are looked up by what they build.
const char* const kV13KernelBuildJobs = R"SQL(
ALTER TABLE jobs ADD COLUMN waits_for bigint NOT NULL DEFAULT 0;
CREATE INDEX jobs_waits_for_idx ON jobs (waits_for) WHERE waits_for <> 0;
CREATE INDEX jobs_build_key_idx ON jobs (catalog, commit_id, platform) WHERE executor = 4;
)SQL";

// At most one live (queued, leased or succeeded) kernel build job per
// (catalog, commit, architecture): of two submits that both found none, the
// second's insert fails and it takes the first's build instead (JobService).
// The duplicates such a race made before are settled first: the jobs that
// wait for one wait for the key's first build (its oldest succeeded one, else
// its oldest) instead, and the other duplicates are cancelled (a succeeded
// one keeps its result).
// Series of one workload with other params are other series (and other
// regressions); rows before it had one series per workload name.
const char* const kV15RegressionParams = R"SQL(
ALTER TABLE regressions ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
)SQL";

// What the kernel counted around a real run's tool (iommufarm.v1.Monitors
// in its JSON mapping); '{}' for emulator runs and results stored before.
const char* const kV16ResultMonitors = R"SQL(
ALTER TABLE results ADD COLUMN monitors jsonb NOT NULL DEFAULT '{}'::jsonb;
)SQL";

// Agent labels select the agents of a matrix's real runs (the claim reads
// matrices.labels, lib/storage/run_eligibility.h); an agent whose health job
// failed (agents.health) is leased nothing. IF NOT EXISTS: a test database
// made at an older version takes these columns early, for today's
// CreateMatrix.
const char* const kV17LabelsAndHealth = R"SQL(
ALTER TABLE matrices ADD COLUMN IF NOT EXISTS labels jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS health jsonb NOT NULL DEFAULT '{}'::jsonb;
)SQL";

// A catalog commit's parents (CatalogCommit.parents, blank-separated ids):
// a catalog imported from a merge-based history is a graph. '' is the
// previous entry, so every catalog stored before is the linear list it was.
const char* const kV18CatalogParents = R"SQL(
ALTER TABLE catalog_commits ADD COLUMN IF NOT EXISTS parents text NOT NULL DEFAULT '';
)SQL";

// What a regressions row found: 'change' (between two commits, confirmed and
// bisected) or 'decay' (the metric fell within the runs of one commit).
const char* const kV19RegressionKind = R"SQL(
ALTER TABLE regressions ADD COLUMN kind text NOT NULL DEFAULT 'change';
)SQL";

// The jobs of a series' cells: the dashboard's series panels and
// variables, and the analyzer's history (HistorySamples), select jobs by
// platform, workload and catalog; indexed, so that none of those reads
// scans every job of the farm's history (bench/store_scale: a year of 10M
// samples is 1.76M jobs). matrix_id last, so the history's newest
// matrices of a cell come from the index.
const char* const kV20JobCellIndex = R"SQL(
CREATE INDEX jobs_cell_idx ON jobs (platform, workload, catalog, matrix_id);
)SQL";

// A catalog commit's author (CatalogCommit.author), as git records it; ''
// where the catalog does not say.
const char* const kV21CatalogAuthor = R"SQL(
ALTER TABLE catalog_commits ADD COLUMN IF NOT EXISTS author text NOT NULL DEFAULT '';
)SQL";

// A build job's kernel config (its param kernel_config, proto/kernel_config.h;
// absent for the default) is part of its key: one live build per (catalog,
// commit, arch, config). Build jobs keep their params in the row
// (PgMatrixStore::CreateMatrix), so the index can read them; the rows before
// have none, so their keys are as they were.
const char* const kV22BuildKeyConfig = R"SQL(
DROP INDEX jobs_live_build_key_idx;
CREATE UNIQUE INDEX jobs_live_build_key_idx
  ON jobs (catalog, commit_id, platform, (coalesce(params->>'kernel_config', '')))
  WHERE executor = 4 AND state IN (1, 2, 3);
)SQL";

// Regressions found within the analyzer's group window whose commit ranges
// overlap are one group: one bisect (of leader_id, the strongest member),
// one alert. The range is the intersection of the members' ranges, where a
// shared culprit must lie. state: open (no member bisecting yet),
// bisecting, culprit (members inherit culprit_id), failed (the leader's
// bisect named none: each member bisects on its own).
const char* const kV23RegressionGroups = R"SQL(
CREATE TABLE regression_groups (
  id               bigserial PRIMARY KEY,
  catalog          text NOT NULL,
  opened_at        timestamptz NOT NULL DEFAULT now(),
  last_good        text NOT NULL DEFAULT '',
  last_good_index  integer NOT NULL DEFAULT 0,
  first_bad        text NOT NULL DEFAULT '',
  first_bad_index  integer NOT NULL DEFAULT 0,
  leader_id        bigint,
  state            text NOT NULL DEFAULT 'open',
  culprit_id       text NOT NULL DEFAULT '',
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX regression_groups_catalog_idx ON regression_groups (catalog, opened_at);
ALTER TABLE regressions ADD COLUMN group_id bigint REFERENCES regression_groups(id);
ALTER TABLE regressions ADD COLUMN strength double precision NOT NULL DEFAULT 0;
CREATE INDEX regressions_group_idx ON regressions (group_id) WHERE group_id IS NOT NULL;
)SQL";

// A running job's progress as its agent last reported it (an
// iommufarm.v1.JobProgress in its JSON form; the heartbeat writes it while
// the lease holds).
const char* const kV24JobProgress = R"SQL(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress jsonb;
)SQL";

// When retention (RetentionStore, farmctl prune --raw-only) emptied a
// result's raw output; NULL while it is the tool's output as reported.
const char* const kV25RawPrunedAt = R"SQL(
ALTER TABLE results ADD COLUMN IF NOT EXISTS raw_pruned_at timestamptz;
)SQL";

// Raw outputs longer than kRawInlineMaxBytes, stored once per distinct
// content (lib/storage/pg/pg_raw_outputs.h); the step after the SQL moves
// the existing ones. zstd frames do not compress again: STORAGE EXTERNAL
// spares TOAST the attempt, and toast_tuple_target keeps a frame in its
// heap row up to a page (measured on the store_scale year: 5.80 MB for
// 4.86 MB of frames, against 6.35 MB moving frames over 2 kB to TOAST and
// 5.91 MB with STORAGE MAIN). The hash index finds a digest's results
// (retention deletes a row nobody names) at a 4-byte hash per out-of-row
// result; NULLs, the inline outputs, are not indexed.
const char* const kV26RawOutputs = R"SQL(
CREATE TABLE raw_outputs (
  digest  bytea PRIMARY KEY,   -- SHA-256 of the output as reported
  size    integer NOT NULL,    -- its bytes as reported
  zstd    bytea NOT NULL       -- one zstd frame of it
) WITH (toast_tuple_target = 8160);
ALTER TABLE raw_outputs ALTER COLUMN zstd SET STORAGE EXTERNAL;
ALTER TABLE results ADD COLUMN raw_digest bytea;
CREATE INDEX results_raw_digest_idx ON results USING hash (raw_digest);
)SQL";

void MoveRawOutputs(pqxx::transaction_base& t) { MoveInlineRawOutputs(t); }

// Where each bisect step ran: its executor ("emulator", "dma-map-bench",
// "fio", "iozone") and whether that was a real kernel. A real confirmation
// of an emulator finding bisects on real kernels, so one regression's steps
// may run on two executors. Steps written before take their matrix's.
const char* const kV27BisectStepExecutor = R"SQL(
ALTER TABLE bisect_steps ADD COLUMN IF NOT EXISTS executor text NOT NULL DEFAULT '';
ALTER TABLE bisect_steps ADD COLUMN IF NOT EXISTS real_kernel boolean NOT NULL DEFAULT false;
UPDATE bisect_steps s SET executor = CASE m.executor WHEN 1 THEN 'emulator' WHEN 2 THEN 'fio'
    WHEN 3 THEN 'iozone' WHEN 5 THEN 'dma-map-bench' ELSE '' END,
  real_kernel = m.executor IN (2, 3, 5)
  FROM matrices m WHERE s.matrix_id = m.id AND s.executor = '';
)SQL";

// The host facts of a result stored once per distinct content and named
// by results.host_id: an agent reports the same facts with every result
// (bench/store_scale: 317 bytes of jsonb per result, 57 per sample, from a
// handful of distinct values). digest: SHA-256 of the facts' canonical
// jsonb text, the key a report looks its facts up by; id 0 is no facts. Rows are never
// deleted: there are as many as there are distinct hosts and guest setups,
// and a report may name one it found a moment before (no foreign key, whose
// per-row check and key-share lock on the few hot rows ingest would pay).
const char* const kV28ResultHosts = R"SQL(
CREATE TABLE result_hosts (
  id      serial PRIMARY KEY,
  digest  bytea NOT NULL UNIQUE,
  host    jsonb NOT NULL
);
-- Id 0: no facts, the default of a result stored without them (as '{}'
-- was the old column's).
INSERT INTO result_hosts (id, digest, host) VALUES (0, sha256(convert_to('{}', 'UTF8')), '{}');
INSERT INTO result_hosts (digest, host)
  SELECT sha256(convert_to(d.host::text, 'UTF8')), d.host
  FROM (SELECT DISTINCT host FROM results WHERE host <> '{}') d ORDER BY 1;
-- The rewritten rows carry NULL where their facts were: a dropped column's
-- bytes stay in every row until it is written again.
ALTER TABLE results ADD COLUMN host_id integer NOT NULL DEFAULT 0,
  ALTER COLUMN host DROP NOT NULL;
UPDATE results r SET host_id = h.id, host = NULL FROM result_hosts h WHERE h.host = r.host;
ALTER TABLE results DROP COLUMN host;
)SQL";

// A result's samples as two arrays of one element per sample: the id of
// its (metric, unit, phase) in sample_keys, and its value (NaN and the
// infinities as themselves). sample_series holds the per-interval figures of
// the samples that have them (a jsonb array aligned with the samples: null,
// or {intervals, interval_seconds}), NULL when none has any, as most do not.
// The jsonb array it replaces took 87 bytes per sample on the store_scale
// year: a key name and a numeric per field, for a handful of distinct
// metrics. Keys are never deleted (a report may name one it found a moment
// before; there are as many as the farm's tools have metrics and phases).
// result_samples is the one-row-per-sample view the dashboards' SQL reads.
// Existing rows are rewritten in this transaction, as a store read them:
// an absent metric, unit or phase is empty, a value a number or its text
// (the non-finite ones were written as "nan", "inf", "-inf"), else 0.
const char* const kV29CompactSamples = R"SQL(
CREATE TABLE sample_keys (
  id      serial PRIMARY KEY,
  metric  text NOT NULL,
  unit    text NOT NULL DEFAULT '',
  phase   text NOT NULL DEFAULT '',
  UNIQUE (metric, unit, phase)
);
ALTER TABLE results
  ADD COLUMN sample_key_ids integer[] NOT NULL DEFAULT '{}',
  ADD COLUMN sample_values float8[] NOT NULL DEFAULT '{}',
  ADD COLUMN sample_series jsonb,
  ALTER COLUMN samples DROP NOT NULL;
CREATE TEMPORARY TABLE old_samples ON COMMIT DROP AS
  SELECT r.job_id, r.attempt, e.o, coalesce(e.v->>'metric', '') AS metric,
    coalesce(e.v->>'unit', '') AS unit, coalesce(e.v->>'phase', '') AS phase,
    CASE jsonb_typeof(e.v->'value')
      WHEN 'number' THEN (e.v->>'value')::float8
      WHEN 'string' THEN CASE
        WHEN e.v->>'value' ~* '^\s*[+-]?nan' THEN 'NaN'::float8
        WHEN e.v->>'value' ~* '^\s*-inf' THEN '-Infinity'::float8
        WHEN e.v->>'value' ~* '^\s*\+?inf' THEN 'Infinity'::float8
        WHEN e.v->>'value' ~ '^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?\s*$'
          THEN (e.v->>'value')::float8
        ELSE 0 END
      ELSE 0 END AS value,
    CASE WHEN jsonb_typeof(e.v->'intervals') = 'array'
      THEN jsonb_strip_nulls(jsonb_build_object('intervals', e.v->'intervals',
                              'interval_seconds', e.v->'interval_seconds')) END AS series
  FROM results r
  CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(r.samples) = 'array'
    THEN r.samples ELSE '[]'::jsonb END) WITH ORDINALITY AS e(v, o);
INSERT INTO sample_keys (metric, unit, phase)
  SELECT DISTINCT metric, unit, phase FROM old_samples ORDER BY 1, 2, 3;
-- The rewritten rows carry NULL where their samples were: a dropped
-- column's bytes stay in every row until it is written again.
UPDATE results r SET samples = NULL, sample_key_ids = n.key_ids, sample_values = n.vals,
    sample_series = n.series
  FROM (SELECT s.job_id, s.attempt, array_agg(k.id ORDER BY s.o) AS key_ids,
          array_agg(s.value ORDER BY s.o) AS vals,
          CASE WHEN bool_or(s.series IS NOT NULL)
            THEN jsonb_agg(s.series ORDER BY s.o) END AS series
        FROM old_samples s JOIN sample_keys k
          ON k.metric = s.metric AND k.unit = s.unit AND k.phase = s.phase
        GROUP BY s.job_id, s.attempt) n
  WHERE r.job_id = n.job_id AND r.attempt = n.attempt;
UPDATE results SET samples = NULL WHERE samples IS NOT NULL;
ALTER TABLE results DROP COLUMN samples;
CREATE VIEW result_samples AS
  SELECT r.job_id, r.attempt, r.matrix_id, s.ord::int AS ord, k.metric, k.unit, k.phase,
    s.value, r.sample_series -> (s.ord::int - 1) AS series
  FROM results r
  CROSS JOIN LATERAL unnest(r.sample_key_ids, r.sample_values)
    WITH ORDINALITY AS s(key_id, value, ord)
  JOIN sample_keys k ON k.id = s.key_id;
)SQL";

// jobs.unbooted: how many of the job's boots on a lab host did not come back
// (its lease held through a kexec expired). The reaper marks the job as not
// booting only at RetryPolicy::boot_attempts of them: a kexec'd kernel that
// once hung may have met a device that did not survive the kexec.
const char* const kV30JobUnbooted = R"SQL(
ALTER TABLE jobs ADD COLUMN unbooted smallint NOT NULL DEFAULT 0;
)SQL";

const char* const kV14OneLiveBuildPerKey = R"SQL(
CREATE TEMPORARY TABLE build_duplicates ON COMMIT DROP AS
  SELECT id, keep FROM (
    SELECT id, first_value(id) OVER (PARTITION BY catalog, commit_id, platform
                                     ORDER BY state = 3 DESC, id) AS keep
    FROM jobs WHERE executor = 4 AND state IN (1, 2, 3)) r
  WHERE id <> keep;
UPDATE jobs j SET waits_for = d.keep FROM build_duplicates d WHERE j.waits_for = d.id;
UPDATE jobs j SET state = 5, finished_at = coalesce(j.finished_at, now()),
  lease_expires_at = NULL,
  failure_reason = 'cancelled: a duplicate of kernel build job ' || d.keep
  FROM build_duplicates d WHERE j.id = d.id;
CREATE UNIQUE INDEX jobs_live_build_key_idx ON jobs (catalog, commit_id, platform)
  WHERE executor = 4 AND state IN (1, 2, 3);
)SQL";

}  // namespace

const std::vector<Migration>& AllMigrations() {
  static const std::vector<Migration>* const kAll = new std::vector<Migration>{
      {1, "initial schema: catalogs, matrices, jobs, results, agents, analysis", kV1Schema},
      {2, "terminal job totals table and NOTIFY farm_matrix on job state changes",
       kV2QueueTotalsAndNotify},
      {3, "regressions.metric_rank and regressions.primary_metrics", kV3RegressionMetricRank},
      {4, "bisect_culprits: every culprit of a bisect with its share", kV4BisectCulprits},
      {5, "api_tokens (hashed) and agent_principals (owner of each agent name)", kV5ApiTokens},
      {6, "regressions: silence of an acknowledged one, check of a fixed one", kV6RegressionTriage},
      {7, "jobs.fair_rank: the claim's round robin across matrices", kV7ClaimFairRank},
      {8, "matrices.model_set and matrix_commit_settings: shared by a matrix's jobs",
       kV8SharedModelSets},
      {9, "jobs.lease_hold_token: a lease held through its agent's reboot", kV9LeaseHold},
      {10, "regressions.confirmed_by, confirm_matrix_id, confirm_note: the confirming executor",
       kV10RegressionConfirmedBy},
      {11, "farm_jobs_updated in one pass without a join (no per-connection quadratic plan)",
       kV11LinearStateTrigger},
      {12, "matrix_workloads: large workload params stored once per matrix",
       kV12SharedWorkloadParams},
      {13, "jobs.waits_for: real jobs run after the kernel build job they name",
       kV13KernelBuildJobs},
      {14, "jobs_live_build_key_idx: one live kernel build job per (catalog, commit, arch)",
       kV14OneLiveBuildPerKey},
      {15, "regressions.params: the workload params of the regression's series",
       kV15RegressionParams},
      {16, "results.monitors: interrupts, vmstat, IOMMU counters and perf around a real run",
       kV16ResultMonitors},
      {17, "matrices.labels and agents.health: agents chosen by label, after a health job",
       kV17LabelsAndHealth},
      {18, "catalog_commits.parents: a catalog's commits as a history graph", kV18CatalogParents},
      {19, "regressions.kind: a change between commits or a decay within runs", kV19RegressionKind},
      {20, "jobs_cell_idx: a series' jobs by platform, workload and catalog", kV20JobCellIndex},
      {21, "catalog_commits.author: who wrote each commit, for the report mail", kV21CatalogAuthor},
      {22, "jobs_live_build_key_idx: the build's kernel config is part of its key",
       kV22BuildKeyConfig},
      {23, "regression_groups and regressions.group_id, strength: one bisect and alert a group",
       kV23RegressionGroups},
      {24, "jobs.progress: a running kernel build's phase and objects", kV24JobProgress},
      {25, "results.raw_pruned_at: raw output dropped by retention, samples kept", kV25RawPrunedAt},
      {26, "raw_outputs: long raw output stored once per content, zstd-compressed", kV26RawOutputs,
       &MoveRawOutputs},
      {27, "bisect_steps.executor, real_kernel: where each step ran", kV27BisectStepExecutor},
      {28, "result_hosts: a result's host facts stored once per content", kV28ResultHosts},
      {29, "sample_keys, results.sample_key_ids and sample_values: samples as arrays",
       kV29CompactSamples},
      {30, "jobs.unbooted: a job's boots that did not come back, before it does not boot",
       kV30JobUnbooted},
  };
  return *kAll;
}

absl::StatusOr<int> ApplyMigrations(PgPool& pool) {
  return pool.Call<int>([](pqxx::connection& c) -> absl::StatusOr<int> {
    {
      pqxx::nontransaction n(c);
      n.exec("SELECT pg_advisory_lock(" + std::to_string(kMigrationLockKey) + ")");
    }
    int version = 0;
    absl::Status failure;
    try {
      {
        pqxx::work w(c);
        w.exec(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())");
        pqxx::row r = w.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations");
        version = r[0].as<int>();
        w.commit();
      }
      for (const Migration& m : AllMigrations()) {
        if (m.version <= version) continue;
        pqxx::work w(c);
        w.exec(m.sql);
        if (m.after != nullptr) m.after(w);
        w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                      m.name);
        w.commit();
        version = m.version;
      }
    } catch (...) {
      failure = CurrentExceptionToStatus("migrate to version " + std::to_string(version + 1));
    }
    if (c.is_open()) {
      try {
        pqxx::nontransaction n(c);
        n.exec("SELECT pg_advisory_unlock(" + std::to_string(kMigrationLockKey) + ")");
      } catch (...) {
        // The lock dies with the session anyway.
      }
    }
    if (!failure.ok()) return failure;
    return version;
  });
}

}  // namespace farm::storage

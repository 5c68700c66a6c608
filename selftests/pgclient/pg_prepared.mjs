// node-postgres through the gate (PGHOST, PGPORT, PGUSER, PGPASSWORD,
// PGDATABASE from the environment): named prepared statements, each a Parse,
// Bind, Describe, Execute and Sync. One JSON line per step on stdout.
import pg from 'pg';

const client = new pg.Client();
await client.connect();
const step = async (name, query) => {
  try {
    const r = await client.query(query);
    console.log(JSON.stringify({ step: name, ok: true, rows: r.rows }));
  } catch (e) {
    console.log(JSON.stringify({ step: name, ok: false, code: e.code, message: e.message }));
  }
};
await step('count', { name: 'count-t', text: 'SELECT count(*)::int AS n FROM t WHERE id > $1', values: [0] });
await step('drop', { name: 'drop-t', text: 'DROP TABLE t' });
await step('again', { name: 'count-t', text: 'SELECT count(*)::int AS n FROM t WHERE id > $1', values: [1] });
await client.end();

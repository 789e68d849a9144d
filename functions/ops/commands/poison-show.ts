/** `poison show <id>`: one poison row, with its raw value. */
import { z } from 'zod';
import { getPoison } from '../queries/poison';
import { caller, poisonId } from '../args';
import { defineCommand } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { cell, fields } from '../format';

export const poisonShow = defineCommand({
  usage: `poison show <poison-id>
      one raw poison row, with its raw value`,
  schema: z.strictObject({ ...caller, id: poisonId }),
  positional: 'id',

  async run(deps, args) {
    const row = await getPoison(deps.sql, args.id);
    if (row === undefined) throw new OpsError(OpsErrorCodes.NOT_FOUND, `no poison row ${args.id}`);
    return { row };
  },

  format: ({ row }) => {
    const { raw_value: raw, ...rest } = row;
    return [fields(Object.entries(rest)), `raw_value (${cell(row.raw_encoding)}):`, cell(raw)].join('\n');
  },
});

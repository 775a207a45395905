import { registerEnumType } from '@nestjs/graphql';

/** What a principal may do (docs/design.md, roles). Read by the configuration, so it lives at the bottom. */
export enum Role {
  ADMIN = 'ADMIN',
  AGENT = 'AGENT',
  REVIEWER = 'REVIEWER',
  VIEWER = 'VIEWER',
  DEPLOYER = 'DEPLOYER',
  CHECKER = 'CHECKER',
}

registerEnumType(Role, {
  name: 'Role',
  valuesMap: {
    CHECKER: { description: 'Reports check results on plans (DESIGN R50) and drift (R53); reads.' },
  },
});
